"""Hugging Face transformers architectures, built offline from tiny configs with random weights.

Nothing is downloaded: each entry names a config class, a model class and a few tiny sizes
(hidden 32, 2 layers, vocabulary 99), and the builder does ``ModelClass(ConfigClass(**sizes))``
in eval mode with a fixed seed. Models are called the way users call them — keyword tensors
(``input_ids``, ``attention_mask``, ``pixel_values``, ...) — and return transformers'
``ModelOutput`` (a dict subclass; comparisons walk its keys). Decoders are built with
``use_cache=False`` so that outputs hold no KV-cache objects.

All entries are tagged "hf" and need the optional ``transformers`` package (see
requirements/corpus.txt); it is imported inside the builders only, so listing the corpus works
without it and the models are reported as skipped.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import torch

from dynamo_lite.report.registry import model, require

VOCAB = 99
BATCH, SEQ = 2, 8

# Sizes most text configs accept under these names.
TEXT = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64)
# Special token ids inside the tiny vocabulary (the defaults of some configs point past it).
SPECIAL = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
EOS = SPECIAL["eos_token_id"]
DECODER = dict(TEXT, use_cache=False)
LLAMA_LIKE = dict(DECODER, num_key_value_heads=2)


@dataclass(frozen=True)
class HFSpec:
    name: str
    config: str                  # transformers config class name
    model: str                   # transformers model class name
    inputs: str                  # key into INPUTS
    sizes: dict = field(default_factory=dict)
    tags: tuple = ()
    doc: str = ""


def _text_inputs(config, token_type=False, pad=True):
    input_ids = torch.randint(3, config.vocab_size, (BATCH, SEQ))
    attention_mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    if pad:
        attention_mask[1, -3:] = 0               # right padding in the second sequence
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if token_type:
        token_type_ids = torch.zeros(BATCH, SEQ, dtype=torch.long)
        token_type_ids[:, SEQ // 2:] = 1
        inputs["token_type_ids"] = token_type_ids
    return inputs


def _text_with_eos(config):
    inputs = _text_inputs(config, pad=False)
    inputs["input_ids"][:, -1] = EOS
    return inputs


def _seq2seq_inputs(config):
    inputs = _text_inputs(config)
    inputs["decoder_input_ids"] = torch.randint(3, config.vocab_size, (BATCH, 5))
    return inputs


def _image_inputs(config):
    size = config.image_size if isinstance(config.image_size, int) else config.image_size[0]
    return {"pixel_values": torch.randn(BATCH, config.num_channels, size, size)}


def _audio_values(config):
    return {"input_values": torch.randn(BATCH, 800)}


def _mel_features(config):
    length = config.max_source_positions * 2               # conv2 has stride 2
    return {"input_features": torch.randn(BATCH, config.num_mel_bins, length)}


INPUTS = {
    "text": _text_inputs,
    "text_unpadded": lambda c: _text_inputs(c, pad=False),
    "text_eos": _text_with_eos,
    "text_tt": lambda c: _text_inputs(c, token_type=True),
    "seq2seq": _seq2seq_inputs,
    "image": _image_inputs,
    "audio_values": _audio_values,
    "mel": _mel_features,
}

SPECS = [
    # ---- encoders -----------------------------------------------------------------------------------
    HFSpec("hf_bert", "BertConfig", "BertModel", "text_tt", dict(TEXT, type_vocab_size=2),
           doc="BERT encoder with token type ids and a padded attention mask"),
    HFSpec("hf_bert_mlm", "BertConfig", "BertForMaskedLM", "text_tt", dict(TEXT),
           doc="BERT masked-LM head (tied decoder weights)"),
    HFSpec("hf_roberta", "RobertaConfig", "RobertaModel", "text",
           dict(TEXT, max_position_embeddings=66, pad_token_id=1),
           doc="RoBERTa: position ids computed from the padding mask (cumsum)"),
    HFSpec("hf_distilbert", "DistilBertConfig", "DistilBertModel", "text",
           dict(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64),
           doc="DistilBERT"),
    HFSpec("hf_albert", "AlbertConfig", "AlbertModel", "text_tt",
           dict(TEXT, embedding_size=16, num_hidden_groups=1), doc="ALBERT: factorised embeddings, shared layers"),
    HFSpec("hf_electra", "ElectraConfig", "ElectraModel", "text_tt", dict(TEXT, embedding_size=16),
           doc="ELECTRA discriminator body"),
    HFSpec("hf_deberta_v2", "DebertaV2Config", "DebertaV2Model", "text",
           dict(TEXT, relative_attention=True, position_biased_input=False, pos_att_type=["p2c", "c2p"],
                max_relative_positions=16, position_buckets=8, type_vocab_size=0),
           doc="DeBERTa-v2: disentangled relative-position attention with log buckets"),
    HFSpec("hf_mobilebert", "MobileBertConfig", "MobileBertModel", "text_tt",
           dict(TEXT, embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16, num_feedforward_networks=2),
           doc="MobileBERT: bottlenecks, NoNorm, stacked feed-forward networks"),
    HFSpec("hf_clip_text", "CLIPTextConfig", "CLIPTextModel", "text_eos", dict(TEXT, **SPECIAL),
           doc="CLIP text tower: causal mask and pooling at the eos token"),
    # ---- decoders ------------------------------------------------------------------------------------
    HFSpec("hf_gpt2", "GPT2Config", "GPT2LMHeadModel", "text",
           dict(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4, use_cache=False, **SPECIAL),
           doc="GPT-2 LM head (Conv1D projections, tied embeddings)"),
    HFSpec("hf_gpt2_seqcls", "GPT2Config", "GPT2ForSequenceClassification", "text",
           dict(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4, use_cache=False, num_labels=3,
                **SPECIAL),
           doc="GPT-2 sequence classification: pooled at the last non-pad token (data-dependent index)"),
    HFSpec("hf_llama", "LlamaConfig", "LlamaForCausalLM", "text", dict(LLAMA_LIKE),
           doc="Llama causal LM: RMSNorm, rotary embeddings, grouped-query attention"),
    HFSpec("hf_mistral", "MistralConfig", "MistralForCausalLM", "text", dict(LLAMA_LIKE, sliding_window=4),
           doc="Mistral with sliding-window attention"),
    HFSpec("hf_mixtral", "MixtralConfig", "MixtralForCausalLM", "text",
           dict(LLAMA_LIKE, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2),
           doc="Mixtral sparse mixture of experts (top-2 routing)"),
    HFSpec("hf_qwen2", "Qwen2Config", "Qwen2Model", "text", dict(LLAMA_LIKE), doc="Qwen2 (q/k/v biases)"),
    HFSpec("hf_qwen3", "Qwen3Config", "Qwen3Model", "text", dict(LLAMA_LIKE, head_dim=8),
           doc="Qwen3 (q/k RMSNorm)"),
    HFSpec("hf_gemma", "GemmaConfig", "GemmaModel", "text", dict(DECODER, num_key_value_heads=1, head_dim=8),
           doc="Gemma (multi-query attention, scaled embeddings)"),
    HFSpec("hf_phi", "PhiConfig", "PhiForCausalLM", "text", dict(DECODER, partial_rotary_factor=0.5),
           doc="Phi: parallel attention/MLP, partial rotary embeddings"),
    HFSpec("hf_gpt_neo", "GPTNeoConfig", "GPTNeoModel", "text",
           dict(vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=37,
                attention_types=[[["global", "local"], 1]], window_size=4, max_position_embeddings=64,
                use_cache=False, **SPECIAL),
           doc="GPT-Neo: alternating global and local attention"),
    HFSpec("hf_gptj", "GPTJConfig", "GPTJModel", "text",
           dict(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, use_cache=False,
                **SPECIAL),
           doc="GPT-J: interleaved rotary embeddings, parallel residual"),
    HFSpec("hf_gpt_neox", "GPTNeoXConfig", "GPTNeoXModel", "text", dict(DECODER, rotary_pct=0.25),
           doc="GPT-NeoX (Pythia)"),
    HFSpec("hf_opt", "OPTConfig", "OPTForCausalLM", "text",
           dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=37, num_attention_heads=4,
                max_position_embeddings=64, word_embed_proj_dim=32, use_cache=False),
           doc="OPT: learned positions offset by the padding mask"),
    HFSpec("hf_bloom", "BloomConfig", "BloomModel", "text",
           dict(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4, use_cache=False),
           doc="BLOOM: ALiBi position bias"),
    HFSpec("hf_falcon", "FalconConfig", "FalconModel", "text",
           dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, use_cache=False),
           doc="Falcon: multi-query attention, parallel attention/MLP"),
    HFSpec("hf_mpt", "MptConfig", "MptModel", "text",
           dict(vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=4, max_seq_len=64, expansion_ratio=2,
                use_cache=False),
           doc="MPT: ALiBi, fused Wqkv"),
    HFSpec("hf_mamba", "MambaConfig", "MambaModel", "text_unpadded",
           dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, state_size=4, expand=2, conv_kernel=4,
                use_cache=False),
           doc="Mamba: selective state-space scan (slow path, a Python loop over time)"),
    # ---- encoder-decoders ----------------------------------------------------------------------------
    HFSpec("hf_t5", "T5Config", "T5Model", "seq2seq",
           dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4,
                relative_attention_num_buckets=8, decoder_start_token_id=0, use_cache=False),
           doc="T5 encoder-decoder: relative position buckets, decoder_input_ids"),
    HFSpec("hf_bart", "BartConfig", "BartModel", "seq2seq",
           dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64,
                use_cache=False),
           doc="BART encoder-decoder"),
    HFSpec("hf_whisper_encoder", "WhisperConfig", "WhisperEncoder", "mel",
           dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, num_mel_bins=8,
                max_source_positions=15, max_target_positions=32, use_cache=False, pad_token_id=0, bos_token_id=1,
                eos_token_id=2, decoder_start_token_id=1),
           doc="Whisper audio encoder: conv stem over log-mel features, sinusoidal positions"),
    # ---- vision / audio ------------------------------------------------------------------------------
    HFSpec("hf_vit", "ViTConfig", "ViTModel", "image",
           dict(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=37),
           doc="ViT: patch embedding, cls token, pooler"),
    HFSpec("hf_dinov2", "Dinov2Config", "Dinov2Model", "image",
           dict(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, mlp_ratio=2),
           doc="DINOv2: interpolated position embeddings, layer scale"),
    HFSpec("hf_swin", "SwinConfig", "SwinModel", "image",
           dict(image_size=32, patch_size=4, num_channels=3, embed_dim=16, depths=[1, 2], num_heads=[2, 2],
                window_size=2),
           doc="Swin: shifted windows, relative position bias, patch merging"),
    HFSpec("hf_convnext", "ConvNextConfig", "ConvNextModel", "image",
           dict(image_size=32, num_channels=3, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1]),
           doc="ConvNeXt (HF implementation)"),
    HFSpec("hf_resnet", "ResNetConfig", "ResNetModel", "image",
           dict(image_size=32, num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                layer_type="bottleneck"),
           doc="ResNet (HF implementation), BatchNorm in eval"),
    HFSpec("hf_segformer", "SegformerConfig", "SegformerModel", "image",
           dict(image_size=32, num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                hidden_sizes=[8, 16], num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2],
                decoder_hidden_size=16),
           doc="SegFormer (MiT) encoder: overlapping patch embeddings, efficient self-attention"),
    HFSpec("hf_wav2vec2", "Wav2Vec2Config", "Wav2Vec2Model", "audio_values",
           dict(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                conv_dim=(16, 16, 16), conv_stride=(4, 4, 4), conv_kernel=(8, 8, 8), num_conv_pos_embeddings=16,
                num_conv_pos_embedding_groups=2, mask_time_prob=0.0),
           doc="wav2vec 2.0: conv feature encoder, weight-normed positional conv"),
]


def _build(spec: HFSpec):
    transformers = require("transformers")
    torch.manual_seed(0)
    config = getattr(transformers, spec.config)(**spec.sizes)
    model_cls = getattr(transformers, spec.model, None)
    if model_cls is None:                                  # e.g. WhisperEncoder is not exported at top level
        family = spec.config[:-len("Config")].lower()
        model_cls = getattr(importlib.import_module(f"transformers.models.{family}.modeling_{family}"), spec.model)
    net = model_cls(config).eval()
    inputs = INPUTS[spec.inputs](config)
    return net, (), inputs


def _register(spec: HFSpec) -> None:
    def build():
        return _build(spec)

    build.__doc__ = f"{spec.model}({spec.config}) — {spec.doc}"
    build.__name__ = f"build_{spec.name}"
    build.__qualname__ = build.__name__
    model(spec.name, tags=("hf", spec.inputs.split("_")[0]) + spec.tags, requires="transformers")(build)


for _spec in SPECS:
    _register(_spec)
