"""The real libraries: models built *from the installed packages* (not copies of their code) and
called the way their documentation calls them, with every default left on.

Hugging Face transformers decoder LMs (called as ``model(input_ids=..., attention_mask=...)`` with
the config's default ``use_cache=True``, so a ``DynamicCache`` is built and returned),
encoder-decoders (``input_ids`` + ``decoder_input_ids``, cache on) and vision models
(``pixel_values``), ``generate()`` (greedy, 8 new tokens, KV cache on), einops layers and functions,
einx, x-transformers, diffusers UNet2D / UNet2DCondition / AutoencoderKL, timm and torchvision
classics.

Every model is tiny (sizes below, generic where the library allows it), random weights, fixed seed,
eval mode; nothing is downloaded (``pretrained=False`` / ``weights=None`` / a config object).
Entries are tagged "lib" plus one tag per library ("hf-lib", "einops", "einx", "xtransformers",
"diffusers", "timm", "torchvision") and name their package with ``requires=``; a missing package
is a skipped model. A package that is installed but fails to import (torchvision 0.28's CUDA-only
C ops next to a CPU torch) is a skipped model too, with the import error as the reason.

The ``*_generate`` entries capture ``model.generate`` itself (``model.generate =
torch.compile(model.generate)``, a pattern users try); the two recommended ways — capture the
forward (``model.forward = capture(model.forward)``) or the module, then call ``generate`` — are
measured per decoding step by `dynamo_lite_corpus.lib_generate` (``python -m dynamo_lite_corpus.lib_generate``).
"""
from __future__ import annotations

import inspect

import torch
import torch.nn as nn

from dynamo_lite.report.registry import model

from .zoo_common import library

BATCH, SEQ, VOCAB = 2, 8, 99
IMAGE = 32


def _register(name: str, tags: tuple, requires: str, doc: str, builder):
    builder.__doc__ = doc
    builder.__name__ = builder.__qualname__ = f"build_{name}"
    model(name, tags=("lib",) + tags, requires=requires)(builder)


def _images(channels=3, size=IMAGE, batch=BATCH):
    return torch.randn(batch, channels, size, size)


# =============================================================================================
# Hugging Face transformers
# =============================================================================================

# Tiny sizes under the names configs use; `_hf_config` keeps those a config class knows (a
# parameter of its __init__, an attribute of its default instance or a key of its attribute_map),
# so one table serves GPT-2 (n_embd via attribute_map), BART (encoder_layers/decoder_layers), T5
# (d_ff, num_decoder_layers) and Llama alike. Token ids point inside the tiny vocabulary.
HF_TINY = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
               intermediate_size=37, max_position_embeddings=64, n_positions=64, ffn_dim=37,
               encoder_layers=2, decoder_layers=2, num_decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, d_ff=37, d_kv=8,
               relative_attention_num_buckets=8, pad_token_id=0, bos_token_id=1, eos_token_id=2,
               decoder_start_token_id=1, forced_eos_token_id=2, word_embed_proj_dim=32)
# Text configs with a settable head_dim get hidden_size // heads (Gemma and Qwen3 default to 256/128).
HF_IMAGE = dict(image_size=IMAGE, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=37)


def _hf_config(transformers, config_name: str, base: dict, extra: dict):
    cls = getattr(transformers, config_name)
    default = cls()
    known = set(inspect.signature(cls.__init__).parameters) | set(getattr(cls, "attribute_map", {})) \
        | set(vars(default))
    aliases = getattr(cls, "attribute_map", {})
    sizes = {k: v for k, v in base.items() if k in known and aliases.get(k) not in extra}
    if base is HF_TINY and "head_dim" in vars(default) and not isinstance(getattr(cls, "head_dim", None), property):
        sizes["head_dim"] = base["hidden_size"] // base["num_attention_heads"]
    sizes.update(extra)
    return cls(**sizes)


def _hf_text(config, pad="right"):
    input_ids = torch.randint(3, config.vocab_size, (BATCH, SEQ))
    attention_mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    if pad == "right":
        attention_mask[1, -3:] = 0
    elif pad == "left":                 # how batched generation pads decoder-only models
        attention_mask[1, :3] = 0
        input_ids[1, :3] = config.pad_token_id if config.pad_token_id is not None else 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def _hf_seq2seq(config):
    inputs = _hf_text(config)
    inputs["decoder_input_ids"] = torch.randint(3, config.vocab_size, (BATCH, 5))
    return inputs


def _hf_image(config):
    return {"pixel_values": _images(config.num_channels, IMAGE)}


def _hf_model(config_name, model_name, base, extra):
    transformers = library("transformers")
    torch.manual_seed(0)
    config = _hf_config(transformers, config_name, base, extra)
    return getattr(transformers, model_name)(config).eval(), config


def _hf_entry(name, config_name, model_name, kind, doc, extra=None, tags=()):
    base = HF_IMAGE if kind == "image" else HF_TINY

    def build():
        net, config = _hf_model(config_name, model_name, base, extra or {})
        inputs = {"decoder": _hf_text, "seq2seq": _hf_seq2seq, "image": _hf_image}[kind](config)
        return net, (), inputs

    _register(name, ("hf-lib", kind) + tags, "transformers", f"{model_name}({config_name}) — {doc}", build)


# ---- decoder LMs: the config's default use_cache (True): a DynamicCache is built and returned ----
_hf_entry("lib_gpt2", "GPT2Config", "GPT2LMHeadModel", "decoder", "GPT-2, default use_cache (DynamicCache)")
_hf_entry("lib_llama", "LlamaConfig", "LlamaForCausalLM", "decoder", "Llama: RMSNorm, RoPE, GQA, DynamicCache")
_hf_entry("lib_mistral", "MistralConfig", "MistralForCausalLM", "decoder", "Mistral (sliding window off by default)")
_hf_entry("lib_qwen2", "Qwen2Config", "Qwen2ForCausalLM", "decoder", "Qwen2 causal LM (q/k/v biases)")
_hf_entry("lib_qwen3", "Qwen3Config", "Qwen3ForCausalLM", "decoder", "Qwen3 causal LM (q/k RMSNorm)")
_hf_entry("lib_phi", "PhiConfig", "PhiForCausalLM", "decoder", "Phi: partial rotary, parallel attention/MLP")
_hf_entry("lib_gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", "decoder", "GPT-NeoX (Pythia)")
_hf_entry("lib_opt", "OPTConfig", "OPTForCausalLM", "decoder", "OPT: learned positions from the mask")
_hf_entry("lib_gemma", "GemmaConfig", "GemmaForCausalLM", "decoder", "Gemma: MQA, scaled embeddings")
_hf_entry("lib_gemma2", "Gemma2Config", "Gemma2ForCausalLM", "decoder",
          "Gemma2: logit soft-capping, alternating sliding-window layers (hybrid cache)")
_hf_entry("lib_falcon", "FalconConfig", "FalconForCausalLM", "decoder", "Falcon: multi-query, parallel attention")
_hf_entry("lib_bloom", "BloomConfig", "BloomForCausalLM", "decoder", "BLOOM: ALiBi")
_hf_entry("lib_gpt_bigcode", "GPTBigCodeConfig", "GPTBigCodeForCausalLM", "decoder", "GPT-BigCode (StarCoder): MQA")
# ---- encoder-decoders: input_ids + decoder_input_ids, use_cache default on (EncoderDecoderCache) ----
_hf_entry("lib_t5", "T5Config", "T5ForConditionalGeneration", "seq2seq", "T5 with LM head, cache on")
_hf_entry("lib_bart", "BartConfig", "BartForConditionalGeneration", "seq2seq", "BART with LM head, cache on")
_hf_entry("lib_marian", "MarianConfig", "MarianMTModel", "seq2seq", "Marian MT: sinusoidal positions, cache on")
_hf_entry("lib_pegasus", "PegasusConfig", "PegasusForConditionalGeneration", "seq2seq", "Pegasus, cache on")
# ---- vision: pixel_values ----
_hf_entry("lib_vit", "ViTConfig", "ViTForImageClassification", "image", "ViT image classifier")
_hf_entry("lib_deit", "DeiTConfig", "DeiTForImageClassificationWithTeacher", "image",
          "DeiT with distillation token (two heads averaged)")
_hf_entry("lib_convnext", "ConvNextConfig", "ConvNextForImageClassification", "image", "ConvNeXt classifier",
          extra=dict(num_stages=2, hidden_sizes=[8, 16], depths=[1, 1]))
_hf_entry("lib_swin", "SwinConfig", "SwinForImageClassification", "image",
          "Swin: shifted windows, relative position bias, patch merging",
          extra=dict(patch_size=4, embed_dim=16, depths=[1, 2], num_heads=[2, 2], window_size=2))


# ---- generate(): greedy, 8 new tokens, KV cache on (generation_config defaults) ----
def _generate_entry(name, config_name, model_name, doc):
    def build():
        net, config = _hf_model(config_name, model_name, HF_TINY, {})
        inputs = _hf_text(config, pad="left")
        return net.generate, (), dict(inputs, max_new_tokens=8, do_sample=False)

    _register(name, ("hf-lib", "generate"), "transformers",
              f"{model_name}.generate(max_new_tokens=8, do_sample=False) captured whole — {doc}", build)


_generate_entry("lib_gpt2_generate", "GPT2Config", "GPT2LMHeadModel", "GPT-2, DynamicCache, left padding")
_generate_entry("lib_llama_generate", "LlamaConfig", "LlamaForCausalLM", "Llama, DynamicCache, left padding")


# =============================================================================================
# einops: layers and functions
# =============================================================================================

def _einops_layers_mixer():
    """An MLP-Mixer made of einops layers: Rearrange patches, EinMix token and channel mixing, Reduce pooling."""
    library("einops")
    from einops.layers.torch import EinMix, Rearrange, Reduce
    torch.manual_seed(0)
    patch, dim, tokens = 8, 32, (IMAGE // 8) ** 2

    class MixerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.token_mix = nn.Sequential(EinMix("b n c -> b hid c", weight_shape="n hid", bias_shape="hid",
                                                  n=tokens, hid=2 * tokens),
                                           nn.GELU(),
                                           EinMix("b hid c -> b n c", weight_shape="hid n", bias_shape="n",
                                                  n=tokens, hid=2 * tokens))
            self.norm2 = nn.LayerNorm(dim)
            self.channel_mix = nn.Sequential(EinMix("b n c -> b n hid", weight_shape="c hid", bias_shape="hid",
                                                    c=dim, hid=2 * dim),
                                             nn.GELU(),
                                             EinMix("b n hid -> b n c", weight_shape="hid c", bias_shape="c",
                                                    c=dim, hid=2 * dim))

        def forward(self, x):
            x = x + self.token_mix(self.norm1(x))
            return x + self.channel_mix(self.norm2(x))

    net = nn.Sequential(
        Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch, p2=patch),
        nn.Linear(patch * patch * 3, dim),
        MixerBlock(), MixerBlock(),
        nn.LayerNorm(dim),
        Reduce("b n c -> b c", "mean"),
        nn.Linear(dim, 10),
    ).eval()
    return net, (_images(),)


def _einops_layers_convnet():
    """A ConvNet from the einops docs: Reduce as max-pool and global pool, Rearrange to flatten, a
    Rearrange-based space-to-depth."""
    library("einops")
    from einops.layers.torch import Rearrange, Reduce
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=3, padding=1), nn.ReLU(),
        Reduce("b c (h h2) (w w2) -> b c h w", "max", h2=2, w2=2),
        Rearrange("b c (h h2) (w w2) -> b (c h2 w2) h w", h2=2, w2=2),      # space-to-depth
        nn.Conv2d(32, 16, kernel_size=3, padding=1), nn.ReLU(),
        Reduce("b c h w -> b c", "mean"),
        nn.Linear(16, 10),
    ).eval()
    return net, (_images(),)


class _EinopsAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        from einops import einsum, rearrange
        q, k, v = rearrange(self.qkv(self.norm(x)), "b n (three h d) -> three b h n d", three=3, h=self.heads)
        dots = einsum(q, k, "b h i d, b h j d -> b h i j") * self.scale
        out = einsum(dots.softmax(dim=-1), v, "b h i j, b h j d -> b h i d")
        return self.out(rearrange(out, "b h n d -> b n (h d)"))


class _EinopsViT(nn.Module):
    """lucidrains/vit-pytorch style: einops.rearrange / repeat / pack / unpack / reduce in forward."""

    def __init__(self, image_size=IMAGE, patch=8, dim=32, depth=2, heads=4, classes=10):
        super().__init__()
        self.patch = patch
        self.to_embedding = nn.Linear(patch * patch * 3, dim)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, (image_size // patch) ** 2 + 1, dim))
        self.layers = nn.ModuleList(nn.ModuleList([_EinopsAttention(dim, heads),
                                                   nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim),
                                                                 nn.GELU(), nn.Linear(2 * dim, dim))])
                                    for _ in range(depth))
        self.head = nn.Linear(2 * dim, classes)

    def forward(self, img):
        from einops import pack, rearrange, reduce, repeat, unpack
        x = rearrange(img, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=self.patch, p2=self.patch)
        x = self.to_embedding(x)
        cls = repeat(self.cls_token, "1 1 d -> b 1 d", b=x.shape[0])
        x, packed_shape = pack([cls, x], "b * d")
        x = x + self.pos
        for attn, ff in self.layers:
            x = x + attn(x)
            x = x + ff(x)
        cls, patches = unpack(x, packed_shape, "b * d")
        pooled = reduce(patches, "b n d -> b d", "mean")
        return self.head(torch.cat([rearrange(cls, "b 1 d -> b d"), pooled], dim=-1))


def _einops_vit():
    """A ViT written with einops functions inside forward (rearrange, repeat, pack, unpack, reduce, einsum)."""
    library("einops")
    torch.manual_seed(0)
    return _EinopsViT().eval(), (_images(),)


_register("lib_einops_mixer", ("einops", "layers"), "einops", _einops_layers_mixer.__doc__, _einops_layers_mixer)
_register("lib_einops_convnet", ("einops", "layers"), "einops", _einops_layers_convnet.__doc__, _einops_layers_convnet)
_register("lib_einops_vit", ("einops", "functions"), "einops", _einops_vit.__doc__, _einops_vit)


# =============================================================================================
# einx
# =============================================================================================

class _EinxBlock(nn.Module):
    """A transformer block written with einx: einx.dot for projections and attention, einx.softmax,
    einx.id (einx 0.4's name for rearrange), einx.sum pooling."""

    def __init__(self, dim=32, heads=4, classes=10):
        super().__init__()
        self.heads = heads
        self.w_qkv = nn.Parameter(torch.randn(dim, 3 * dim) * dim ** -0.5)
        self.w_out = nn.Parameter(torch.randn(dim, dim) * dim ** -0.5)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        import einx
        rearrange = getattr(einx, "id", None) or einx.rearrange
        qkv = einx.dot("b n c, c (three hc) -> three b n hc", self.norm(x), self.w_qkv, three=3)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = einx.dot("b q (h c), b k (h c) -> b h q k", q, k, h=self.heads) * (q.shape[-1] // self.heads) ** -0.5
        attn = einx.softmax("b h q [k]", attn)
        out = einx.dot("b h q k, b k (h c) -> b q (h c)", attn, v, h=self.heads)
        x = x + einx.dot("b n c, c d -> b n d", out, self.w_out)
        x = rearrange("b n c -> b c n", x)
        return self.head(einx.sum("b c [n]", x) / x.shape[-1])


def _einx_block():
    """A transformer block written with einx (dot, softmax, id/rearrange, sum) inside forward."""
    library("einx")
    torch.manual_seed(0)
    return _EinxBlock().eval(), (torch.randn(BATCH, SEQ, 32),)


_register("lib_einx_block", ("einx",), "einx", _einx_block.__doc__, _einx_block)


# =============================================================================================
# x-transformers
# =============================================================================================

def _xt_decoder():
    """x_transformers.TransformerWrapper(Decoder(dim=32, depth=2, heads=4)) on token ids."""
    xt = library("x_transformers")
    torch.manual_seed(0)
    net = xt.TransformerWrapper(num_tokens=VOCAB, max_seq_len=64,
                                attn_layers=xt.Decoder(dim=32, depth=2, heads=4)).eval()
    return net, (torch.randint(0, VOCAB, (BATCH, SEQ)),)


def _xt_encoder():
    """x_transformers.TransformerWrapper(Encoder(dim=32, depth=2, heads=4)) with a padding mask."""
    xt = library("x_transformers")
    torch.manual_seed(0)
    net = xt.TransformerWrapper(num_tokens=VOCAB, max_seq_len=64,
                                attn_layers=xt.Encoder(dim=32, depth=2, heads=4)).eval()
    mask = torch.ones(BATCH, SEQ, dtype=torch.bool)
    mask[1, -3:] = False
    return net, (torch.randint(0, VOCAB, (BATCH, SEQ)),), {"mask": mask}


def _xt_vit():
    """x_transformers.ViTransformerWrapper(image_size=32, patch_size=8, Encoder(dim=32, depth=2, heads=4))."""
    xt = library("x_transformers")
    torch.manual_seed(0)
    net = xt.ViTransformerWrapper(image_size=IMAGE, patch_size=8, num_classes=10,
                                  attn_layers=xt.Encoder(dim=32, depth=2, heads=4)).eval()
    return net, (_images(),)


def _xt_encdec():
    """x_transformers.XTransformer (encoder-decoder) with source mask, called as model(src, tgt, mask=...)."""
    xt = library("x_transformers")
    torch.manual_seed(0)
    net = xt.XTransformer(dim=32, enc_num_tokens=VOCAB, enc_depth=2, enc_heads=4, enc_max_seq_len=64,
                          dec_num_tokens=VOCAB, dec_depth=2, dec_heads=4, dec_max_seq_len=64).eval()
    src = torch.randint(0, VOCAB, (BATCH, SEQ))
    mask = torch.ones(BATCH, SEQ, dtype=torch.bool)
    mask[1, -3:] = False
    return net, (src, torch.randint(0, VOCAB, (BATCH, 6))), {"mask": mask}


for _name, _fn in (("lib_xt_decoder", _xt_decoder), ("lib_xt_encoder", _xt_encoder), ("lib_xt_vit", _xt_vit),
                   ("lib_xt_encdec", _xt_encdec)):
    _register(_name, ("xtransformers",), "x_transformers", _fn.__doc__, _fn)


# =============================================================================================
# diffusers
# =============================================================================================

def _unet2d():
    """diffusers.UNet2DModel (tiny blocks: DownBlock2D + AttnDownBlock2D), called as unet(sample, timestep)."""
    diffusers = library("diffusers")
    torch.manual_seed(0)
    net = diffusers.UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                                block_out_channels=(16, 32), norm_num_groups=8, attention_head_dim=8,
                                down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                up_block_types=("AttnUpBlock2D", "UpBlock2D")).eval()
    return net, (_images(3, 16), torch.tensor([10, 500]))


def _unet2d_condition():
    """diffusers.UNet2DConditionModel (tiny: CrossAttnDownBlock2D + DownBlock2D), unet(sample, timestep,
    encoder_hidden_states)."""
    diffusers = library("diffusers")
    torch.manual_seed(0)
    net = diffusers.UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                                         block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=32,
                                         attention_head_dim=8,
                                         down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                         up_block_types=("UpBlock2D", "CrossAttnUpBlock2D")).eval()
    return net, (_images(4, 16), torch.tensor([10, 500]), torch.randn(BATCH, 7, 32))


def _autoencoder_kl():
    """diffusers.AutoencoderKL (tiny: two encoder/decoder blocks, 4 latent channels), forward(sample)."""
    diffusers = library("diffusers")
    torch.manual_seed(0)
    net = diffusers.AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, layers_per_block=1,
                                  block_out_channels=(16, 32), norm_num_groups=8,
                                  down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
                                  up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D")).eval()
    return net, (_images(3, 16),)


for _name, _fn in (("lib_diffusers_unet2d", _unet2d), ("lib_diffusers_unet2d_condition", _unet2d_condition),
                   ("lib_diffusers_autoencoder_kl", _autoencoder_kl)):
    _register(_name, ("diffusers",), "diffusers", _fn.__doc__, _fn)


# =============================================================================================
# timm
# =============================================================================================

TIMM = {
    "resnet18": {}, "efficientnet_b0": {}, "mobilenetv3_small_100": {}, "convnext_atto": {},
    "vit_tiny_patch16_224": {"img_size": IMAGE}, "deit_tiny_patch16_224": {"img_size": IMAGE},
}


def _timm_entry(arch, kwargs):
    def build():
        timm = library("timm")
        torch.manual_seed(0)
        return timm.create_model(arch, pretrained=False, **kwargs).eval(), (_images(),)

    extra = ", " + ", ".join(f"{k}={v}" for k, v in kwargs.items()) if kwargs else ""
    _register(f"lib_timm_{arch}", ("timm", "vision"), "timm",
              f"timm.create_model({arch!r}, pretrained=False{extra}) on 2x3x32x32", build)


for _arch, _kwargs in TIMM.items():
    _timm_entry(_arch, _kwargs)


# =============================================================================================
# torchvision
# =============================================================================================

TORCHVISION = {
    "resnet18": {}, "mobilenet_v3_small": {}, "efficientnet_b0": {},
    "vit_b_16": {"image_size": IMAGE},               # 12 layers of nn.MultiheadAttention, 2x5 tokens
}


def _tv_entry(arch, kwargs):
    def build():
        tv = library("torchvision")
        torch.manual_seed(0)
        return getattr(tv.models, arch)(weights=None, **kwargs).eval(), (_images(),)

    extra = ", " + ", ".join(f"{k}={v}" for k, v in kwargs.items()) if kwargs else ""
    _register(f"lib_tv_{arch}", ("torchvision", "vision"), "torchvision",
              f"torchvision.models.{arch}(weights=None{extra}) on 2x3x32x32", build)


for _arch, _kwargs in TORCHVISION.items():
    _tv_entry(_arch, _kwargs)


def _tv_vit_small():
    """torchvision.models.VisionTransformer (nn.MultiheadAttention encoder) with constructor sizes:
    patch 8, 2 layers, 4 heads, hidden 32."""
    tv = library("torchvision")
    torch.manual_seed(0)
    net = tv.models.VisionTransformer(image_size=IMAGE, patch_size=8, num_layers=2, num_heads=4, hidden_dim=32,
                                      mlp_dim=64, num_classes=10).eval()
    return net, (_images(),)


_register("lib_tv_vit_small", ("torchvision", "vision"), "torchvision", _tv_vit_small.__doc__, _tv_vit_small)
