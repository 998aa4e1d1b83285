"""The "hf" suite: every architecture of the installed transformers, built tiny from its own config.

One entry per model type of ``transformers.models.auto.modeling_auto.MODEL_MAPPING_NAMES`` (the base
model: ``LlamaModel``, ``ViTModel``, ``WhisperModel``, ...), named ``hf.<model_type>`` and tagged
``("hf", "zoo", <modality>)``, the modality read from the task tables the type appears in. Listing
reads those name tables only: no config or model is made until a builder runs.

A builder makes the model the way the library's own tests do, from the config class's defaults with
every size lowered (`tiny_config`): 2 layers (more where a per-layer list needs them to keep one
layer of each kind: sliding and full attention, linear attention, ...), widths 64, 4 heads (kv heads
2, or 1 where the model uses multi-query attention), head_dim 16, feed-forward 128, vocabulary 99,
4 experts (top-2), per-stage depths 1 and widths scaled down together, images 32x32 with patches of
at most 8. Sub-configs (text_config, vision_config, encoder, decoder, backbone_config, ...) shrink by
the same rules; attributes a config derives (Swin's hidden_size, layer_types) are left for it to
derive again; special token ids move inside the small vocabulary. Nothing else changes: every default
stays on (use_cache, sliding windows, MoE routing, ...). A model that does not take the tiny image
gets the image geometry its config has.

Inputs follow the model's documented call (`input_variants`): its ``main_input_name`` and the
required parameters of its ``forward``, as keyword tensors — ``input_ids`` + ``attention_mask``
(right-padded), ``decoder_input_ids`` for encoder-decoders, ``pixel_values`` at the config's image
size (video: a frames axis), ``input_values`` (a waveform) and ``input_features`` (the model's own
feature extractor run on noise, else the config's feature size). A text model that also takes images,
video or audio is called with both, with as many placeholder tokens as its own
``get_<kind>_features`` makes, in the layouts its forward's parameters name (``image_grid_thw``,
``image_sizes``, ...). A model whose forward needs anything else is skipped, with the parameters named.

The first recipe that builds and runs is found once per process and checked: more than `MAX_PARAMS`
parameters or an eager call slower than `MAX_EAGER_S` means a size was not derived from the config,
and the model is skipped (`CannotBuild`) with the reason; so is a config or model that cannot be made,
or a call that fails on the generic inputs. ``python -m dynamo_lite_corpus.zoo_hf [-k PATTERN]``
builds the matching architectures and prints their parameter counts and eager times, or why not.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import math
import sys
import time
from types import SimpleNamespace

import torch

from dynamo_lite.report.registry import CannotBuild, model, suite_problems

# The sizes of the hand-picked HF models of dynamo_lite_corpus.libraries, whose helpers the builders use.
from .libraries import IMAGE, VOCAB
from .zoo_common import BATCH


def _libraries():
    from dynamo_lite_corpus import libraries
    return libraries


MAX_PARAMS = 5_000_000       # a tiny model has well under this: more means a size was not lowered
MAX_EAGER_S = 2.0            # the same for time: a tiny model's eager call takes milliseconds

# =============================================================================================
# listing: names only
# =============================================================================================

# task table (modeling_auto.MODEL_FOR_<TASK>_MAPPING_NAMES) -> modality; the first match wins
_MODALITY_OF_TASK = (
    ("IMAGE_TEXT_TO_TEXT", "multimodal"), ("MULTIMODAL_LM", "multimodal"), ("VISUAL_QUESTION_ANSWERING", "multimodal"),
    ("ZERO_SHOT_IMAGE_CLASSIFICATION", "multimodal"), ("ZERO_SHOT_OBJECT_DETECTION", "multimodal"),
    ("DOCUMENT_QUESTION_ANSWERING", "multimodal"),
    ("SPEECH_SEQ_2_SEQ", "audio"), ("CTC", "audio"), ("AUDIO_CLASSIFICATION", "audio"), ("RNNT", "audio"),
    ("TDT", "audio"), ("AUDIO_XVECTOR", "audio"), ("AUDIO_FRAME_CLASSIFICATION", "audio"),
    ("TEXT_TO_WAVEFORM", "audio"), ("TEXT_TO_SPECTROGRAM", "audio"),
    ("VIDEO_CLASSIFICATION", "video"),
    ("TIME_SERIES_PREDICTION", "time-series"), ("TIME_SERIES_CLASSIFICATION", "time-series"),
    ("TIME_SERIES_REGRESSION", "time-series"),
    ("IMAGE_CLASSIFICATION", "vision"), ("IMAGE", "vision"), ("OBJECT_DETECTION", "vision"), ("BACKBONE", "vision"),
    ("SEMANTIC_SEGMENTATION", "vision"), ("IMAGE_SEGMENTATION", "vision"), ("INSTANCE_SEGMENTATION", "vision"),
    ("UNIVERSAL_SEGMENTATION", "vision"), ("DEPTH_ESTIMATION", "vision"), ("MASK_GENERATION", "vision"),
    ("KEYPOINT_DETECTION", "vision"), ("KEYPOINT_MATCHING", "vision"), ("MASKED_IMAGE_MODELING", "vision"),
    ("IMAGE_TO_IMAGE", "vision"), ("IMAGE_MATTING", "vision"), ("POSE_ESTIMATION", "vision"),
    ("TEXT_RECOGNITION", "vision"), ("TABLE_RECOGNITION", "vision"), ("NORMAL_ESTIMATION", "vision"),
    ("POINTMAP_ESTIMATION", "vision"),
    ("CAUSAL_LM", "text"), ("MASKED_LM", "text"), ("SEQ_TO_SEQ_CAUSAL_LM", "text"), ("SEQUENCE_CLASSIFICATION", "text"),
    ("TOKEN_CLASSIFICATION", "text"), ("QUESTION_ANSWERING", "text"), ("TEXT_ENCODING", "text"),
    ("MULTIPLE_CHOICE", "text"), ("PRETRAINING", "text"),
)
# types in no task table: the end of their name says what they are
_MODALITY_OF_SUFFIX = (("_vision_model", "vision"), ("_vision", "vision"), ("_vision_encoder", "vision"),
                       ("_text_model", "text"), ("_text", "text"), ("_audio", "audio"), ("_audio_encoder", "audio"),
                       ("_encoder", "other"))


def _modality(modeling_auto, model_type: str) -> str:
    for task, modality in _MODALITY_OF_TASK:
        if model_type in getattr(modeling_auto, f"MODEL_FOR_{task}_MAPPING_NAMES", {}):
            return modality
    for suffix, modality in _MODALITY_OF_SUFFIX:
        if model_type.endswith(suffix):
            return modality
    return "other"


def architectures() -> dict:
    """model type -> (base model class name, modality), from transformers' auto tables (names only).

    Empty, with the reason in ``suite_problems["hf"]``, when transformers is missing or broken."""
    try:
        installed = importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):          # blocked by an import hook, or a None entry in sys.modules
        installed = False
    if not installed:
        suite_problems["hf"] = "transformers is not installed (pip install -r requirements/corpus.txt)"
        return {}
    try:
        from transformers.models.auto import modeling_auto
    except Exception as exc:      # noqa: BLE001 - an installed but broken transformers lists nothing
        suite_problems["hf"] = f"transformers fails to import: {type(exc).__name__}: {exc}"
        return {}
    found = {}
    for model_type, class_name in modeling_auto.MODEL_MAPPING_NAMES.items():
        if isinstance(class_name, (tuple, list)):      # funnel: (FunnelModel, FunnelBaseModel)
            class_name = class_name[0]
        found[model_type] = (class_name, _modality(modeling_auto, model_type))
    return found


# =============================================================================================
# tiny configs
# =============================================================================================

LAYERS, WIDTH, HEADS, KV_HEADS, HEAD_DIM, FFN = 2, 64, 4, 2, 16, 128
EXPERTS, TOP_K = 4, 2
MAX_LAYERS = 8               # layers kept when one of each kind (full / sliding / linear attention, ...) needs more
STAGE_WIDTH = 16             # the first stage of a per-stage width list (ConvNeXt, Swin, PVT, ...)
PATCH = 8                    # patches of at most 8 pixels on the 32x32 image
FRAMES = 4                   # video clips


def _matches(key: str, names: tuple) -> bool:
    """`names` holds exact keys and "*suffix" patterns."""
    return any(key.endswith(n[1:]) if n.startswith("*") else key == n for n in names)


# Sizes by the names configs give them. The first rule that names a key decides, so the specific
# names come first (ffn_hidden_size is a feed-forward size, not a width).
HEAD_DIM_KEYS = ("*head_dim", "d_kv", "d_head", "kv_channels", "dim_head")
KV_HEAD_KEYS = ("*key_value_heads", "*kv_heads", "multi_query_group_num")
HEAD_KEYS = ("*attention_heads", "*num_heads", "n_head", "n_heads", "*_n_heads", "attention_heads")
FFN_KEYS = ("*intermediate_size", "*ffn_dim", "d_ff", "dff", "dim_ff", "d_inner", "n_inner", "*ffn_hidden_size",
            "dim_feedforward", "*mlp_dim", "*feedforward_dim", "*_linear_units", "hidden_dim",
            "*intermediate_dim", "*_ffn_size", "share_expert_dim")
WIDTH_KEYS = ("*hidden_size", "d_model", "n_embd", "dim", "*embed_dim", "emb_dim", "embedding_dim", "embedding_size",
              "*projection_dim", "projection_size", "project_dim", "*_output_dim", "*hidden_dim", "d_embed",
              "*channels", "upsample_initial_channel")    # channel counts: an image's num_channels (3) is below WIDTH
VOCAB_KEYS = ("*vocab_size",)
LAYER_KEYS = ("*hidden_layers", "num_layers", "n_layer", "n_layers", "*encoder_layers", "*decoder_layers",
              "layers", "depth")
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "moe_topk", "moe_k", "top_k_experts")
GROUP_KEYS = ("n_group", "topk_group", "n_shared_experts")          # DeepSeek's expert groups: one
TOKEN_ID_KEYS = ("*token_id", "*token_index", "*token_ids")
# sizes a config may leave None for its model to derive, or that some models read unset
NONE_SIZES = {"head_dim": HEAD_DIM, "num_key_value_heads": HEADS, "vocab_size": VOCAB}
# per-stage lists: depths 1 each, widths scaled so that the first is STAGE_WIDTH, heads in the same ratio
DEPTH_LIST_KEYS = ("depths", "*_depths", "num_layers", "layers", "depth")
WIDTH_LIST_KEYS = ("hidden_sizes", "*_hidden_sizes", "embed_dims", "embed_dim", "dims", "conv_dim", "hidden_dims",
                   "*channels", "widths", "out_features")
HEAD_LIST_KEYS = ("num_heads", "*attention_heads", "heads")
# image and video geometry (left alone when the model wants its own)
FRAME_KEYS = ("num_frames", "frames_per_clip")
FEATURE_LAYER_KEYS = ("*feature_layer", "*feature_layers")     # layer indices of a (shrunk) vision tower
IMAGE_KEYS = ("image_size", "crop_size")


def _power_of_two_at_most(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _scalar(key: str, value: int, sibling: dict, depth: int, geometry: bool) -> int:
    """The tiny value of one integer attribute (`sibling`: the dict it sits in, as the config has it;
    `depth`: the layer count chosen for that dict)."""
    if _matches(key, HEAD_DIM_KEYS):
        return min(value, HEAD_DIM)
    if _matches(key, KV_HEAD_KEYS):
        heads = next((sibling[k] for k in ("num_attention_heads", "n_head", "num_heads") if
                      isinstance(sibling.get(k), int)), None)
        if value == 1:
            return 1                                       # multi-query attention stays multi-query
        return _power_of_two_at_most(min(value, HEADS)) if value == heads else min(value, KV_HEADS)
    if _matches(key, HEAD_KEYS):
        return _power_of_two_at_most(min(value, HEADS))
    caps = ((FFN_KEYS, FFN), (WIDTH_KEYS, WIDTH), (VOCAB_KEYS, VOCAB), (LAYER_KEYS, depth),
            (EXPERT_KEYS, EXPERTS), (TOP_K_KEYS, TOP_K))       # the first family the key is in caps it
    cap = next((limit for keys, limit in caps if _matches(key, keys)), None)
    if cap is not None:
        return min(value, cap)
    if key in GROUP_KEYS:
        return min(value, 1)
    if geometry and key in IMAGE_KEYS:
        return min(value, IMAGE)
    if geometry and key == "patch_size":
        return value if value <= PATCH and IMAGE % value == 0 else min(PATCH, IMAGE)
    if geometry and key in FRAME_KEYS:
        return min(value, FRAMES)
    if geometry and key == "mm_tokens_per_image":          # Gemma 3 pools the patch grid to this many tokens
        return min(value, (IMAGE // PATCH) ** 2 // 4)
    if _matches(key, FEATURE_LAYER_KEYS):                  # a hidden state of the vision tower: keep it inside
        return max(-(LAYERS + 1), min(value, LAYERS))
    return value


def _int_list(value) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value)


def _stage_factor(whole: dict) -> int:
    """One divisor for every per-stage width list of a config, so that widths equal before (a stage's
    output and the next one's input) stay equal: the narrowest stage becomes about STAGE_WIDTH."""
    widths = [v for key, value in whole.items() if _int_list(value) and _matches(key, WIDTH_LIST_KEYS)
              for v in value if v >= STAGE_WIDTH]
    return max(1, min(widths) // STAGE_WIDTH) if widths else 1


def _int_list_value(key: str, value: list, sibling: dict, depth: int, factor: int, geometry: bool) -> list:
    """Per-stage lists (depths, widths, heads), a [height, width] image size, and per-layer sizes
    (Gemma3n's intermediate_size per layer) lowered one by one."""
    if _matches(key, DEPTH_LIST_KEYS):
        return [min(v, 1) for v in value]
    if _matches(key, WIDTH_LIST_KEYS):
        return [v // factor if v >= STAGE_WIDTH else v for v in value]     # input channels (3) stay
    if _matches(key, HEAD_LIST_KEYS):
        first = value[0]
        return [max(1, v // first) for v in value] if first and all(v % first == 0 for v in value) else [1] * len(value)
    if key in IMAGE_KEYS:
        return [min(v, IMAGE) for v in value] if geometry else value
    return [_scalar(key, v, sibling, depth, geometry) for v in value]


def _is_config_dict(value) -> bool:
    return isinstance(value, dict) and "model_type" in value


def _is_config(value) -> bool:
    return hasattr(value, "to_dict") and hasattr(value, "model_type")


def _init_keys(config_cls) -> set:
    """The attributes a config class takes: anything else in its `to_dict()` is derived from these
    (Swin's hidden_size, a backbone's stage_names) and is left for the class to derive again."""
    if dataclasses.is_dataclass(config_cls):
        return {f.name for f in dataclasses.fields(config_cls) if f.init}
    return set(inspect.signature(config_cls.__init__).parameters) - {"self", "kwargs"}


def _layer_count(whole: dict, taken: set) -> tuple:
    """(layers as the config has them, layers to keep): LAYERS, or more where a per-layer list
    (layer_types, ...) or a layer offset (Jamba's attn_layer_offset) needs more to keep one layer of each kind.
    Only a layer count the class takes counts (`taken`): Swin derives num_layers from its stages."""
    before = next((whole[k] for k in ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
                   if k in taken and isinstance(whole.get(k), int) and not isinstance(whole.get(k), bool)), None)
    if before is None:
        return None, LAYERS
    need = LAYERS
    for key, value in whole.items():
        if isinstance(value, (list, tuple)) and len(value) == before >= 3 and all(isinstance(v, str) for v in value):
            first_of_kind = {v: i for i, v in reversed(list(enumerate(value)))}
            need = max(need, max(first_of_kind.values()) + 1)
        elif key.endswith("layer_offset") and isinstance(value, int) and value < before:
            need = max(need, value + 1)
    return before, min(before, max(LAYERS, min(need, MAX_LAYERS)))


def _shrink(config, geometry: bool) -> dict:
    """The keyword arguments of a tiny `config` of the same class: sizes lowered, sub-configs shrunk
    by the same rules (as dicts with their model_type, the way configs accept them)."""
    whole = config.to_dict()
    taken = _init_keys(type(config))
    before, depth = _layer_count(whole, taken)
    factor = _stage_factor(whole)
    aliases = getattr(type(config), "attribute_map", {})     # Qwen3-MoE: num_experts is stored as num_local_experts
    out = {}
    for key in sorted(taken):
        stored = key if key in whole else aliases.get(key)
        if stored not in whole:
            continue
        value, attribute = whole[stored], getattr(config, key, None)
        if _is_config(attribute):
            out[key] = dict(_shrink(attribute, geometry), model_type=attribute.model_type)
        elif _is_config_dict(value):
            out[key] = dict(_shrink(_config_class(value["model_type"])(**value), geometry),
                            model_type=value["model_type"])
        else:
            out[key] = _tiny_value(key, value, whole, depth, factor, geometry)
    _cut_per_layer(whole, out, _field_defaults(type(config)), before, depth)
    _fit_ssm_heads(out)
    _fit_rotary(out, type(config))
    return out


def _tiny_value(key, value, whole: dict, depth: int, factor: int, geometry: bool):
    if value is None:
        return NONE_SIZES.get(key)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _scalar(key, value, whole, depth, geometry)
    if _int_list(value):
        return type(value)(_int_list_value(key, list(value), whole, depth, factor, geometry))
    if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):   # rope_parameters, ...
        return {k: _tiny_value(k, v, value, depth, factor, geometry) for k, v in value.items()}
    return value


def _cut_per_layer(whole: dict, tiny: dict, defaults: dict, before, depth: int) -> None:
    """Per-layer settings follow the new depth: lists with one item per layer are left for the config
    to derive again when their default is None, else cut; dicts keyed by layer index (Gemma4's
    per_layer_config) keep the layers that remain."""
    if before is None or before == depth:
        return
    for key, value in whole.items():
        if key not in tiny:
            continue
        if isinstance(value, (list, tuple)) and len(value) == before >= 3:
            tiny[key] = None if defaults.get(key, "") is None else type(value)(list(tiny[key])[:depth])
        elif "layer" in key and isinstance(value, dict) and value and all(str(k).isdigit() for k in value):
            tiny[key] = {k: v for k, v in tiny[key].items() if int(k) < depth}


def _fit_ssm_heads(tiny: dict) -> None:
    """Mamba-2 style blocks: heads * head_dim must equal expand * hidden_size."""
    for heads, head_dim, expand in (("num_heads", "head_dim", "expand"),
                                    ("mamba_n_heads", "mamba_d_head", "mamba_expand")):
        values = [tiny.get(k) for k in (heads, head_dim, expand, "hidden_size")]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            tiny[heads] = max(1, values[2] * values[3] // values[1])


def _rope_dicts(tiny: dict):
    for key in ("rope_parameters", "rope_scaling"):
        rope = tiny.get(key)
        if isinstance(rope, dict):
            yield rope
            yield from (v for v in rope.values() if isinstance(v, dict))    # one per layer type


def _fit_rotary(tiny: dict, config_cls) -> None:
    """Rotary settings sized in head dimensions: M-RoPE sections sum to half the rotated dims
    (head_dim * partial_rotary_factor), rotary_dim fits the head, MLA's qk_head_dim is nope + rope."""
    heads, hidden = tiny.get("num_attention_heads"), tiny.get("hidden_size")
    head_dim = tiny.get("head_dim") if isinstance(tiny.get("head_dim"), int) else (
        hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads else HEAD_DIM)
    rope = tiny.get("rope_parameters")
    if "mrope_section" in getattr(config_cls, "ignore_keys_at_rope_validation", ()) and isinstance(rope, dict) \
            and "mrope_section" not in rope:
        # Qwen2-VL and GLM-4V text models fall back to sections sized for 128-dim heads (t:h:w = 2:3:3)
        tiny["rope_parameters"] = dict(rope, mrope_section=[2, 3, 3])
    for rope in _rope_dicts(tiny):
        if _int_list(rope.get("mrope_section")):
            sections = rope["mrope_section"]
            partial = rope.get("partial_rotary_factor", tiny.get("partial_rotary_factor", 1.0)) or 1.0
            half, total = int(head_dim * partial) // 2, sum(sections)
            scaled = [max(1, s * half // total) for s in sections]
            scaled[0] += half - sum(scaled)
            if scaled[0] >= 1:
                rope["mrope_section"] = scaled
    if isinstance(tiny.get("rotary_dim"), int):
        tiny["rotary_dim"] = min(tiny["rotary_dim"], head_dim)
    if all(isinstance(tiny.get(k), int) for k in ("qk_head_dim", "qk_nope_head_dim", "qk_rope_head_dim")):
        tiny["qk_head_dim"] = tiny["qk_nope_head_dim"] + tiny["qk_rope_head_dim"]


def _field_defaults(config_cls) -> dict:
    if dataclasses.is_dataclass(config_cls):
        return {f.name: f.default for f in dataclasses.fields(config_cls)
                if f.default is not dataclasses.MISSING}
    return {name: p.default for name, p in inspect.signature(config_cls.__init__).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _config_class(model_type: str):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    return CONFIG_MAPPING[model_type]


def _token_ids_inside_vocab(tiny: dict, moved: dict) -> None:
    """Special token ids past the tiny vocabulary get distinct ids counted down from its end (the same
    id everywhere it appears: a pad id in the text config and the top config stays one id)."""
    def inside(value):
        if isinstance(value, bool) or not isinstance(value, int) or value < VOCAB:
            return value
        if value not in moved:
            moved[value] = VOCAB - 1 - len(moved)
        return moved[value]

    for key, value in tiny.items():
        if _is_config_dict(value):
            _token_ids_inside_vocab(value, moved)
        elif _matches(key, TOKEN_ID_KEYS):
            tiny[key] = [inside(v) for v in value] if isinstance(value, list) else inside(value)


def special_token_ids(config) -> set:
    """Every special token id of a config and its sub-configs (inputs keep clear of them)."""
    found = set()
    for key, value in (config if isinstance(config, dict) else config.to_dict()).items():
        if _is_config_dict(value):
            found |= special_token_ids(value)
        elif _matches(key, TOKEN_ID_KEYS):
            found |= {v for v in (value if isinstance(value, list) else [value]) if isinstance(v, int)}
    return found


def tiny_config(config_cls, geometry: bool = True):
    """`config_cls`'s defaults with every size lowered (see the module docstring); `geometry=False`
    leaves image, patch and clip sizes as they are."""
    tiny = _shrink(config_cls(), geometry)
    _token_ids_inside_vocab(tiny, {})
    return config_cls(**tiny)


# =============================================================================================
# inputs: the documented call
# =============================================================================================

def _find(config, names: tuple):
    """The first int attribute among `names` in `config` or (breadth first) its sub-configs, else None."""
    queue = [config]
    while queue:
        current = queue.pop(0)
        for name in names:
            value = getattr(current, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, (list, tuple)) and _int_list(value):
                return value[0]
        queue += [v for v in vars(current).values() if _is_config(v)]
    return None


def _text(config) -> dict:
    """input_ids and a right-padded attention_mask (`_hf_text`), with ordinary tokens only."""
    vocab = _find(config, ("vocab_size",))
    if not vocab:
        raise CannotBuild("forward takes input_ids but the config has no vocab_size")
    inputs = _libraries()._hf_text(SimpleNamespace(vocab_size=vocab))
    avoid = special_token_ids(config)
    allowed = torch.tensor([t for t in range(3, vocab) if t not in avoid])
    inputs["input_ids"] = allowed[inputs["input_ids"] % len(allowed)]
    return inputs


def _decoder_input_ids(config):
    ids = _text(config)["input_ids"][:, :5]
    start = getattr(config, "decoder_start_token_id", None)
    if isinstance(start, int):
        ids[:, 0] = start
    return ids


def _pixel_values(config):
    """(batch, channels, side, side) images at the config's image size; video models (a config with
    num_frames) get (batch, frames, channels, side, side)."""
    side = _find(config, IMAGE_KEYS) or IMAGE
    channels = _find(config, ("num_channels", "in_channels", "in_chans")) or 3
    frames = _find(config, FRAME_KEYS)
    if frames:
        return torch.randn(BATCH, frames, channels, side, side)
    return torch.randn(BATCH, channels, side, side)


def _video(config):
    side = _find(config, IMAGE_KEYS) or IMAGE
    channels = _find(config, ("num_channels", "in_channels", "in_chans")) or 3
    return torch.randn(BATCH, _find(config, FRAME_KEYS) or FRAMES, channels, side, side)


def _flat_patches(config) -> dict:
    """Qwen2-VL style vision towers take the image processor's output: flattened patches and a
    (t, h, w) grid per image (a 4x4 grid of one frame, a multiple of the spatial merge size)."""
    patch = _find(config, ("patch_size",)) or 14
    temporal = _find(config, ("temporal_patch_size",)) or 1
    channels = _find(config, ("in_channels", "num_channels")) or 3
    side = 2 * (_find(config, ("spatial_merge_size", "merge_size")) or 2)
    grid = torch.tensor([[1, side, side]] * BATCH)
    return {"hidden_states": torch.randn(BATCH * side * side, channels * temporal * patch * patch),
            "grid_thw": grid}


def _waveform(seconds=0.5, rate=16000):
    return torch.randn(BATCH, int(seconds * rate))


MEL_KEYS = ("num_mel_bins", "feature_size", "input_feat_size", "feature_projection_input_dim", "input_dim", "n_mels")


def _feature_extractor(model_type: str, config):
    """The model's own feature extractor with its defaults (its feature size the config's), or None
    (there is none, or it needs librosa, ...)."""
    from transformers.models.auto import feature_extraction_auto
    name = feature_extraction_auto.FEATURE_EXTRACTOR_MAPPING_NAMES.get(model_type)
    if name is None:
        return None
    try:
        cls = getattr(sys.modules["transformers"], name)
        bins = _find(config, MEL_KEYS)
        sized = bins and "feature_size" in inspect.signature(cls.__init__).parameters
        return cls(feature_size=bins) if sized else cls()
    except Exception:                  # noqa: BLE001 - no usable extractor: the config's sizes instead
        return None


def _extracted(model_type: str, config, wanted: str):
    """What the feature extractor makes of half a second of noise, if it makes `wanted`."""
    extractor = _feature_extractor(model_type, config)
    if extractor is None:
        return None
    rate = getattr(extractor, "sampling_rate", 16000) or 16000
    try:
        features = extractor([w.numpy() for w in _waveform(rate=rate)], sampling_rate=rate, return_tensors="pt")
    except Exception:                  # noqa: BLE001
        return None
    if wanted not in features:
        return None
    return {k: v for k, v in features.items() if isinstance(v, torch.Tensor)}



def _audio_variants(model_type: str, config, wanted: str) -> list:
    """Candidate audio inputs: the feature extractor's output, else a waveform (input_values) or
    features of the config's size, channels first and channels last."""
    extracted = _extracted(model_type, config, wanted)
    if extracted is not None:
        return [extracted]
    if wanted == "input_values":
        return [{"input_values": _waveform()}]
    bins = _find(config, MEL_KEYS)
    if bins is None:
        raise CannotBuild(f"no usable feature extractor and no feature size ({', '.join(MEL_KEYS)}) for {wanted}")
    variants = [{wanted: torch.randn(BATCH, bins, 100)}, {wanted: torch.randn(BATCH, 100, bins)}]
    positions = _find(config, ("max_source_positions",))
    if positions and positions <= 1500:                    # Whisper wants its full 30 s: 2 x 1500 frames
        variants.append({wanted: torch.randn(BATCH, bins, 2 * positions)})
    return variants


def _series(config) -> dict:
    length = _find(config, ("context_length",))
    if length is None:
        raise CannotBuild("forward takes past_values but the config has no context_length")
    channels = _find(config, ("num_input_channels",))
    return {"past_values": torch.randn(BATCH, length, channels) if channels else torch.randn(BATCH, length)}


def _image_layouts(config, params) -> list:
    """pixel_values in the layouts forward's parameters say the image processor may make: flattened
    patches with image_grid_thw (Qwen2-VL style); else images, images with their image_sizes
    (Mistral3, LightOnOCR), images with an images-per-sample axis (Idefics, SmolVLM)."""
    if "image_grid_thw" in params:
        patches = _flat_patches(config)
        return [{"pixel_values": patches["hidden_states"], "image_grid_thw": patches["grid_thw"]}]
    pixel_values = _pixel_values(config)
    layouts = [{"pixel_values": pixel_values}]
    if "image_sizes" in params:
        layouts.append({"pixel_values": pixel_values, "image_sizes": torch.tensor([list(pixel_values.shape[-2:])] * BATCH)})
    layouts.append({"pixel_values": pixel_values.unsqueeze(1)})
    return layouts


AUDIO_MASKS = ("input_features_mask", "feature_attention_mask")       # audio-LMs name the audio frames' mask so

# Optional inputs of another modality that make a text model multimodal, the most common first:
# forward parameter, the <kind> of its get_<kind>_features, the config's names for its placeholder token.
MEDIA = (("pixel_values", "image", ("image_token_id", "image_token_index")),
         ("pixel_values_videos", "video", ("video_token_id", "video_token_index")),
         ("input_features", "audio", ("audio_token_id", "audio_token_index")),
         ("input_values", "audio", ("audio_token_id", "audio_token_index")))


def _media_variants(model_type: str, config, params, name: str) -> list:
    if name == "pixel_values":
        return _image_layouts(config, params)
    if name == "pixel_values_videos":
        return [{"pixel_values_videos": _video(config)}]
    variants = []
    for found in _audio_variants(model_type, config, name):
        features = found[name]          # the text has the attention mask; the audio's goes by its own name
        mask = found.get("attention_mask", torch.ones(BATCH, features.shape[-1], dtype=torch.long))
        variants.append(dict({name: features}, **{p: mask for p in AUDIO_MASKS if p in params}))
    return variants


def _features_per_item(net, kind: str, media: dict):
    """How many placeholder tokens one sample needs: the features the model's own get_<kind>_features
    makes of `media`, per sample (None: the model has no such method or it says nothing countable)."""
    name = f"get_{kind}_features"
    owner = next((m for m in net.modules() if hasattr(m, name)), None)    # T5Gemma2: on its encoder
    if owner is None:
        return None
    getter = getattr(owner, name)
    accepted = inspect.signature(getter).parameters
    with torch.no_grad():
        features = getter(**{k: v for k, v in media.items() if k in accepted})
    if not isinstance(features, (torch.Tensor, list, tuple)):
        features = getattr(features, "pooler_output", None)
    if isinstance(features, (list, tuple)) and features and isinstance(features[0], torch.Tensor):
        return sum(f.reshape(-1, f.shape[-1]).shape[0] for f in features) // BATCH
    if isinstance(features, torch.Tensor):
        return features.reshape(-1, features.shape[-1]).shape[0] // BATCH
    return None


def _text_with_media(net, config, params, kind: str, token_names: tuple, media: dict) -> dict:
    """input_ids + attention_mask + the other modality's inputs; where the config names a placeholder
    token (LLaVA-style models), each sequence starts with as many of them as the model makes features."""
    inputs = dict(_text(config), **media)
    token = _find(config, token_names)
    count = _features_per_item(net, kind, media) if token is not None else None
    if count:
        placeholders = torch.full((BATCH, count), token, dtype=inputs["input_ids"].dtype)
        inputs["input_ids"] = torch.cat([placeholders, inputs["input_ids"]], dim=1)
        inputs["attention_mask"] = torch.cat([torch.ones_like(placeholders), inputs["attention_mask"]], dim=1)
    if "mm_token_type_ids" in params and token is not None:      # Qwen2-VL style: which tokens are an image's (1) or a video's (2)
        inputs["mm_token_type_ids"] = (inputs["input_ids"] == token).long() * (2 if kind == "video" else 1)
    return inputs


# forward parameters the recipes fill; anything else required means no generic call
_FILLED = ("input_ids", "attention_mask", "decoder_input_ids", "pixel_values", "pixel_values_videos",
           "input_values", "input_features", "past_values", "hidden_states", "grid_thw")


def input_variants(model_type: str, net, config) -> list:
    """Candidate keyword inputs for ``net(**inputs)``, each a function making the dict, to be tried in
    order: the main input and the required parameters of forward, an attention mask with text,
    decoder_input_ids for encoder-decoders. A text model that also takes images (or video, or audio)
    is called with both — leaving the other tower out would avoid its code — in the layouts the
    model may want; `CannotBuild` when forward needs inputs no recipe makes."""
    params = inspect.signature(net.forward).parameters
    main = net.main_input_name
    required = [name for name, p in params.items() if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    mains = [m for m in (main if isinstance(main, (list, tuple)) else [main]) if m in params]  # vision towers
    wanted = list(dict.fromkeys(mains + required))       # of VLMs may keep the "input_ids" class default
    unknown = [name for name in wanted if name not in _FILLED]
    if unknown:
        raise CannotBuild(f"forward needs {', '.join(unknown)}: no generic input recipe")
    if "hidden_states" in wanted and "grid_thw" not in params:
        raise CannotBuild("forward needs hidden_states (no grid_thw): no generic input recipe")

    def base(audio=None):
        inputs = {}
        if "input_ids" in wanted:
            text = _text(config)
            inputs.update(text if "attention_mask" in params else {"input_ids": text["input_ids"]})
        if "pixel_values" in wanted:
            inputs["pixel_values"] = _pixel_values(config)
        if "pixel_values_videos" in wanted:
            inputs["pixel_values_videos"] = _video(config)
        if "past_values" in wanted:
            inputs.update(_series(config))
        if "hidden_states" in wanted:
            inputs.update(_flat_patches(config))
        if audio:
            inputs.update({k: v for k, v in audio.items() if k in params})
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params \
                and "decoder_input_ids" not in inputs:
            inputs["decoder_input_ids"] = _decoder_input_ids(config)
        return inputs

    if "input_ids" in wanted and "attention_mask" in params:
        for name, kind, token_names in MEDIA:
            if name in params and name not in wanted:
                variants = [lambda media=media: dict(base(), **_text_with_media(net, config, params, kind,
                                                                                 token_names, media))
                            for media in _media_variants(model_type, config, params, name)]
                if kind == "audio" and _find(config, token_names) is None:
                    variants.append(base)       # speech or text, not both in one sequence (SeamlessM4T)
                return variants
    audio = next((a for a in ("input_features", "input_values") if a in wanted), None)
    if audio is not None:
        return [lambda variant=variant: base(variant) for variant in _audio_variants(model_type, config, audio)]
    return [base]


# =============================================================================================
# building and checking
# =============================================================================================

_RECIPE: dict = {}       # model type -> (geometry, input variant) that built and ran, found once per process


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"


def _make(model_type: str, class_name: str, geometry: bool):
    """(model, config, input variants), seeded; `CannotBuild` when the config or model cannot be made."""
    transformers = _libraries().library("transformers")
    config_cls = _config_class(model_type)
    try:
        config_cls()
    except Exception as exc:       # noqa: BLE001 - e.g. a sub-config that must be given, a download
        raise CannotBuild(f"the default config cannot be made: {_short(exc)}") from exc
    try:
        config = tiny_config(config_cls, geometry)
    except Exception as exc:       # noqa: BLE001
        raise CannotBuild(f"the tiny config is rejected: {_short(exc)}") from exc
    try:
        model_cls = getattr(transformers, class_name)
    except Exception as exc:       # noqa: BLE001 - not exported, or a backend (torchaudio, ...) missing
        raise CannotBuild(f"{class_name} cannot be imported: {_short(exc)}") from exc
    torch.manual_seed(0)
    try:
        net = model_cls(config).eval()
    except Exception as exc:       # noqa: BLE001
        raise CannotBuild(f"{class_name} cannot be built from the tiny config: {_short(exc)}") from exc
    return net, config, input_variants(model_type, net, config)


def _check(net, inputs) -> float:
    """Parameter count and eager time within bounds; returns the eager seconds."""
    params = sum(p.numel() for p in net.parameters())
    if params > MAX_PARAMS:
        biggest = sorted(((p.numel(), n) for n, p in net.named_parameters()), reverse=True)[:3]
        raise CannotBuild(f"still {params / 1e6:.1f}M parameters after shrinking (largest: "
                          + ", ".join(f"{n} {c / 1e6:.1f}M" for c, n in biggest) + ")")
    seconds = math.inf
    for _ in range(2):                 # the first call may pay one-off initialisation
        start = time.perf_counter()
        try:
            net(**inputs)
        except Exception as exc:       # noqa: BLE001
            raise CannotBuild(f"the eager call fails on the generic inputs: {_short(exc)}") from exc
        seconds = min(seconds, time.perf_counter() - start)
        if seconds <= MAX_EAGER_S:
            return seconds
    raise CannotBuild(f"the eager call takes {seconds:.1f} s (> {MAX_EAGER_S} s): a size was not lowered")


def _geometry_matters(model_type: str) -> bool:
    """Whether keeping the config's own image geometry makes a different tiny config."""
    try:
        default = _config_class(model_type)()
        return _shrink(default, True) != _shrink(default, False)
    except Exception:              # noqa: BLE001 - the first attempt has said why already
        return False


def _find_recipe(model_type: str, class_name: str) -> tuple:
    """The first (geometry, input variant) that builds and runs within bounds; the first failure's
    reason as `CannotBuild` when none does."""
    first_error = None
    for geometry in (True, False):
        if not geometry and not _geometry_matters(model_type):
            break
        try:
            net, _, variants = _make(model_type, class_name, geometry)
            for index, make_inputs in enumerate(variants):
                try:
                    inputs = make_inputs()
                except CannotBuild:
                    raise
                except Exception as exc:       # noqa: BLE001 - e.g. get_image_features wants more inputs
                    first_error = first_error or CannotBuild(f"the generic inputs cannot be made: {_short(exc)}")
                    continue
                try:
                    _check(net, inputs)
                    return geometry, index
                except CannotBuild as exc:
                    first_error = first_error or exc
        except CannotBuild as exc:
            first_error = first_error or exc
    raise first_error


def build_tiny(model_type: str, class_name: str):
    """(model, config, inputs) for one architecture, freshly built and never called; `CannotBuild`
    with the reason when it cannot be made tiny and run."""
    if model_type not in _RECIPE:
        _RECIPE[model_type] = _find_recipe(model_type, class_name)
    geometry, index = _RECIPE[model_type]
    net, config, variants = _make(model_type, class_name, geometry)
    return net, config, variants[index]()


def _register(model_type: str, class_name: str, modality: str) -> None:
    def build():
        net, _, inputs = build_tiny(model_type, class_name)
        return net, (), inputs

    build.__doc__ = f"transformers {class_name}, tiny config derived from the {model_type!r} defaults"
    build.__name__ = build.__qualname__ = f"build_hf_{model_type.replace('-', '_')}"
    model(f"hf.{model_type}", tags=("hf", "zoo", modality), requires="transformers")(build)


ARCHITECTURES = architectures()
for _type, (_class_name, _modality_name) in ARCHITECTURES.items():
    _register(_type, _class_name, _modality_name)


def main(argv=None) -> int:
    """Build the architectures matching -k and print parameters and eager time (or why skipped)."""
    import argparse
    parser = argparse.ArgumentParser(prog="python -m dynamo_lite_corpus.zoo_hf", description=main.__doc__)
    parser.add_argument("-k", dest="pattern", default="")
    args = parser.parse_args(argv)
    for model_type, (class_name, modality) in ARCHITECTURES.items():
        if args.pattern not in model_type:
            continue
        try:
            net, _, inputs = build_tiny(model_type, class_name)
            seconds = _check(net, inputs)
            params = sum(p.numel() for p in net.parameters())
            print(f"{model_type:36s} {modality:11s} ok  {params / 1e3:8.1f}k params  {seconds * 1e3:7.1f} ms")
        except CannotBuild as exc:
            print(f"{model_type:36s} {modality:11s} skipped: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
