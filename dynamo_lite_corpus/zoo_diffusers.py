"""The "diffusers" suite: every model class diffusers exports (a subclass of ``diffusers.ModelMixin``:
UNets, autoencoders, DiT/SD3/Flux/PixArt/... transformers, controlnets, priors, adapters),
registered as ``diffusers.<Class>``, built from a tiny configuration derived from its constructor
and called with inputs derived from its ``forward``.

Nothing here names a model class. The recipe:

1. **Config** (`tiny_config`): every constructor parameter with a default keeps it, except those
   whose *name* says what they size, shrunk consistently:
   depths (``num_layers``, ``layers_per_block``, ``num_res_blocks``, ``*_depth``, ...) to 1;
   head counts to at most 2 (key/value heads to 1 where they were fewer than the heads);
   head widths (``attention_head_dim``, ``head_dim``) and rotary splits (``axes_dims_rope``, ...)
   divided by 4, so the splits still add up to the head width (in a UNet, whose
   ``attention_head_dim`` counts heads, it becomes 8); channel tuples (``block_out_channels``) to 32
   per block; normalisation groups to at most 8; other widths (``*_dim``, ``hidden_size``,
   ``*_channels`` above 64 but the in/out/latent ones) to 32, except a width equal to the model width
   (heads x head width), which follows it (``caption_projection_dim``, PixArt's
   ``cross_attention_dim``), and feed-forward widths, which become twice the model width;
   ``sample_size`` and ``sample_height``/``sample_width`` to 16, ``sample_frames`` to what makes 5
   latent frames. If that config does not build or run, it is tried again with values for the
   parameters some classes default to None but need (``in_channels``, ``patch_size``,
   ``sample_size``), then with depths of 2.
2. **Inputs** (`inputs_for`): from ``forward``'s parameters. The main input (``sample``,
   ``hidden_states``, ``x``) is tried in the layouts a diffusers model may take, in an order guessed
   from the class name: images B x C x 16 x 16 (and 64 x 64), videos B x C x 5 x 16 x 16 and
   B x 5 x C x 16 x 16, packed tokens B x 16 x C (Flux-style, with ``img_ids``/``txt_ids``), audio
   B x C x 64 (and 4096), vectors B x C. ``timestep`` is ``[10., 500.]``; ``encoder_hidden_states``
   is B x 7 x D with D the config's text width (``caption_channels``, ``joint_attention_dim``, ...,
   ``cross_attention_dim``); ``pooled_projections``, ``class_labels``, ``guidance``, masks and
   ``controlnet_cond`` follow the config. Parameters with defaults keep them (``return_dict=True``
   included); the named extras are passed when the call without them fails.
3. The first config and layout whose real (tiny) forward runs is the model's recipe. A class that
   needs constructor arguments no rule gives (``MultiControlNetModel(controlnets)``), or a required
   input no rule makes, or whose every recipe fails, is skipped with the reason (the first error).

The recipe search is cached per process; builders re-seed and rebuild from the found recipe.
"""
from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass
from typing import Optional

import torch

from dynamo_lite.report.registry import CannotBuild

from . import zoo_common as zoo

WIDTH, SIDE, FRAMES, TOKENS, TEXT, AUDIO, LONG_AUDIO = 32, 16, 5, 16, 7, 64, 4096
TIMESTEPS = (10.0, 500.0)
MAIN_INPUTS = ("sample", "hidden_states", "x", "latents")
# the width of encoder_hidden_states: the first of these the config has (a caption projected to the
# model width names its own width; cross_attention_dim is the text width only where nothing else is)
TEXT_WIDTHS = ("caption_channels", "joint_attention_dim", "text_embed_dim", "text_dim", "encoder_hid_dim",
               "context_in_dim", "cap_feat_dim", "text_hidden_dim", "in_text_dim", "dit_text_dim", "text_encoder_dim",
               "encoder_hidden_states_channels", "llm_features_dim", "cross_attention_dim", "embedding_dim")

# ---- what a constructor parameter sizes, by its name ----
DEPTH = re.compile(r"(^|_)(layers|blocks|depth|layers_per_block|layers_per_mid_block)$")
HEADS = re.compile(r"(^|_)(heads|head)$")
GROUPS = re.compile(r"(^|_)groups$")
KV_HEADS = re.compile(r"(key_value|kv)_heads$")
HEAD_WIDTH = re.compile(r"(^|_)(head_dim|dim_head|attention_head_dim)$")
ROTARY_SPLIT = re.compile(r"(axes_dims?|rope_axes_dim|axes_dims?_rope|rope_dim_list|mrope_section)$")
CHANNEL_TUPLE = re.compile(r"(block_out_channels|conditioning_embedding_out_channels)$")
WIDTH_NAME = re.compile(r"(_dim|^dim|_channels|^channels|^ch|hidden_size|intermediate_size|_width|^model_dim)$")
FEED_FORWARD = re.compile(r"(intermediate|ffn|ff_dim|mlp)")
NOT_A_WIDTH = re.compile(r"^(in|out|input|output|latent|z|conditioning|audio|sound|action|vae)_|^(in|out)_|"
                         r"vocab|max|len|seq|num_|sample|patch|pos|rate|hop|fft|bins|codebook|window|frames|"
                         r"theta|scale|ratio|factor|groups|proj_in|latent")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value) -> bool:
    return isinstance(value, (tuple, list)) and value and all(_is_int(v) for v in value)


def _map(value, fn):
    """`fn` applied to an int, or to each int of a tuple/list (keeping its type)."""
    if _is_int(value):
        return fn(value)
    return type(value)(fn(v) for v in value)


def _defaults(cls) -> dict:
    return {name: p.default for name, p in list(inspect.signature(cls.__init__).parameters.items())[1:]
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def tiny_config(cls, depth: int = 1, fill_none: bool = False) -> dict:
    """The constructor keywords that make `cls` tiny (see the module docstring). Raises CannotBuild when
    a parameter without a default has no rule. `fill_none`: also give values to the parameters of
    `NEEDED_WHEN_NONE` whose default is None (some classes need them, others treat None as "off")."""
    defaults = _defaults(cls)
    unet_like = any(CHANNEL_TUPLE.search(n) for n in defaults)
    heads_name = next((n for n in ("num_attention_heads", "num_heads", "heads") if _is_int(defaults.get(n))), None)
    width_name = next((n for n in ("attention_head_dim", "head_dim") if _is_int(defaults.get(n))), None)
    old_heads = defaults[heads_name] if heads_name else None
    new_heads = min(old_heads, 2) if old_heads else None
    old_inner = new_inner = None
    if heads_name and width_name and not unet_like:
        old_inner = old_heads * defaults[width_name]
        new_inner = new_heads * max(1, defaults[width_name] // 4)
    elif heads_name and _is_int(defaults.get("hidden_size")) and defaults["hidden_size"] % old_heads == 0:
        old_inner = defaults["hidden_size"]
        new_inner = new_heads * max(1, old_inner // old_heads // 4)

    config, missing = {}, []
    for name, value in defaults.items():
        if value is inspect.Parameter.empty or (fill_none and value is None and name in NEEDED_WHEN_NONE):
            value = _required_value(name)
            if value is None:
                missing.append(name)
                continue
            config[name] = value
            continue
        new = _shrink(name, value, unet_like, old_heads, new_heads, old_inner, new_inner, depth)
        if name == "sample_frames" and _is_int(defaults.get("temporal_compression_ratio")):
            new = (FRAMES - 1) * defaults["temporal_compression_ratio"] + 1     # FRAMES latent frames
        if new is not value and new != value:
            config[name] = new
    if missing:
        raise CannotBuild(f"{cls.__name__}() needs {', '.join(missing)} with no default and no generic value "
                          f"(a wrapper of other models or a config-only class)")
    return config


# Parameters some classes default to None although their constructor needs a value.
NEEDED_WHEN_NONE = ("in_channels", "patch_size", "sample_size")


def _required_value(name: str):
    """A value for a constructor parameter without a (usable) default, where its name says enough."""
    if name in ("in_channels", "out_channels"):
        return 4
    if name == "patch_size":
        return 2
    if name == "latent_channels":
        return 4
    if CHANNEL_TUPLE.search(name):
        return (WIDTH, WIDTH)
    if DEPTH.search(name):
        return 1
    if name.endswith("compression_ratio"):
        return 4
    if name == "sample_size":
        return SIDE
    return None


def _shrink(name, value, unet_like, old_heads, new_heads, old_inner, new_inner, depth):
    if value is None or isinstance(value, (bool, float, str)):
        return value
    if not (_is_int(value) or _ints(value)):
        return value
    if DEPTH.search(name) and "type" not in name:
        return _map(value, lambda v: min(v, depth))
    if KV_HEADS.search(name):
        return _map(value, lambda v: new_heads if old_heads and v >= old_heads else 1)
    if HEADS.search(name):
        return _map(value, lambda v: min(v, 2))
    if GROUPS.search(name):
        return _map(value, lambda v: min(v, 8))
    if HEAD_WIDTH.search(name):
        return _map(value, lambda v: 8) if unet_like else _map(value, lambda v: max(1, v // 4))
    if ROTARY_SPLIT.search(name):
        return _map(value, lambda v: max(1, v // 4))
    if CHANNEL_TUPLE.search(name) and _ints(value):
        return type(value)(WIDTH for _ in value)
    if name in ("sample_size", "sample_height", "sample_width"):
        return _map(value, lambda v: min(v, SIDE))
    if name == "sample_frames":
        return min(value, FRAMES)
    if _is_int(value) and value > 64 and WIDTH_NAME.search(name) and not NOT_A_WIDTH.search(name):
        if old_inner and value == old_inner:
            return new_inner
        if FEED_FORWARD.search(name):
            return 2 * (new_inner or WIDTH)
        return WIDTH
    return value


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """How the main input is shaped."""
    name: str

    def main(self, channels: int) -> torch.Tensor:
        shape = {"image": (zoo.BATCH, channels, SIDE, SIDE),
                 "large_image": (zoo.BATCH, channels, 4 * SIDE, 4 * SIDE),
                 "video": (zoo.BATCH, channels, FRAMES, SIDE, SIDE),
                 "video_frames_first": (zoo.BATCH, FRAMES, channels, SIDE, SIDE),
                 "tokens": (zoo.BATCH, TOKENS, channels),
                 "audio": (zoo.BATCH, channels, AUDIO),
                 "long_audio": (zoo.BATCH, channels, LONG_AUDIO),
                 "vector": (zoo.BATCH, channels)}[self.name]
        return torch.randn(shape)


def _layouts(cls_name: str) -> list:
    """Layouts to try, the likeliest first (from words in the class name)."""
    order = ["image", "tokens", "video", "video_frames_first", "audio", "large_image"]
    if re.search(r"3D|Video|Temporal|Motion|Allegro|Mochi|Wan|Cosmos|Magvit|VidTok", cls_name):
        order = ["video", "video_frames_first", "image", "tokens", "audio"]
    elif re.search(r"1D|Audio|Oobleck|Film", cls_name):
        order = ["audio", "long_audio", "tokens", "image", "video"]
    return [Layout(n) for n in order + ["vector"]]


def _text_width(config: dict, defaults: dict) -> int:
    for name in TEXT_WIDTHS:
        value = config.get(name, defaults.get(name))
        if _is_int(value):
            return value
    return WIDTH


def _main_channels(config: dict, defaults: dict) -> int:
    for name in ("in_channels", "input_channels", "latent_channels", "in_visual_dim", "audio_channels", "latent_dim",
                 "embedding_dim", "hidden_size"):
        value = config.get(name, defaults.get(name))
        if _is_int(value):
            return value
    return 3


def _grid_ids(count: int) -> torch.Tensor:
    """Flux-style position ids: (count, 3) rows of (0, row, column) on a square grid."""
    side = max(1, int(count ** 0.5))
    index = torch.arange(count)
    return torch.stack([torch.zeros(count), (index // side).float(), (index % side).float()], dim=1)


def _extra(name: str, main: torch.Tensor, layout: Layout, config: dict, defaults: dict, unet_like: bool):
    """A value for a named forward input, or None when no rule knows it."""
    def get(key, fallback=None):
        return config.get(key, defaults.get(key, fallback))

    tokens = main.shape[1] if layout.name == "tokens" else TOKENS
    if name in ("timestep", "t", "timestep_r", "r_timestep", "timesteps", "audio_timestep"):
        return torch.tensor(TIMESTEPS)
    if name == "timestep_ratio":
        return torch.tensor([t / 1000 for t in TIMESTEPS])
    if name == "fps":
        return torch.tensor([8] * zoo.BATCH)
    if name.startswith("encoder_hidden_states") or name in ("text_hidden_states", "cap_feats", "context"):
        return torch.randn(zoo.BATCH, TEXT, _text_width(config, defaults))
    if name in ("encoder_attention_mask", "encoder_mask", "encoder_hidden_states_mask", "text_attention_mask"):
        return torch.ones(zoo.BATCH, TEXT, dtype=torch.long)
    if name == "pooled_projections":
        return torch.randn(zoo.BATCH, get("pooled_projection_dim", WIDTH) or WIDTH)
    if name == "class_labels":
        classes = get("num_class_embeds") or get("num_embeds_ada_norm") or 10
        return torch.randint(0, classes, (zoo.BATCH,))
    if name == "guidance":
        return torch.full((zoo.BATCH,), 3.5) if get("guidance_embeds") else None
    if name == "img_ids":
        return _grid_ids(tokens)
    if name == "txt_ids":
        return torch.zeros(TEXT, 3)
    if name == "img_shapes":                 # (frames, rows, columns) of patches, per sample
        side = int(tokens ** 0.5)
        return [[(1, side, side)]] * zoo.BATCH
    if name in ("original_size", "target_size", "crop_coords"):
        return torch.tensor([[SIDE * 8, SIDE * 8]] * zoo.BATCH, dtype=torch.float32)
    if name == "proj_embedding":
        return torch.randn(zoo.BATCH, get("embedding_dim", WIDTH))
    if name == "controlnet_cond":
        if unet_like and get("conditioning_channels"):
            return torch.randn(zoo.BATCH, get("conditioning_channels"), SIDE * 8, SIDE * 8)
        return torch.randn_like(main)
    return None


OPTIONAL_EXTRAS = ("timestep", "encoder_hidden_states", "pooled_projections", "class_labels", "guidance",
                   "img_ids", "txt_ids", "img_shapes", "encoder_attention_mask")


def inputs_for(cls, config: dict, layout: Layout, with_extras: bool) -> dict:
    """Keyword inputs for `cls(**config).forward` in `layout`. Raises CannotBuild for a required input no
    rule makes."""
    defaults = _defaults(cls)
    unet_like = any(CHANNEL_TUPLE.search(n) for n in defaults)
    params = [p for p in list(inspect.signature(cls.forward).parameters.values())[1:]
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if not params:
        raise CannotBuild(f"{cls.__name__}.forward takes only *args/**kwargs: no generic inputs")
    main_name = next((p.name for p in params if p.name in MAIN_INPUTS), params[0].name)
    main = layout.main(_main_channels(config, defaults))
    kwargs = {main_name: main}
    for p in params:
        if p.name == main_name:
            continue
        required = p.default is inspect.Parameter.empty
        if not required and not (with_extras and p.name in OPTIONAL_EXTRAS) and p.name not in ("timestep",):
            continue
        value = _extra(p.name, main, layout, config, defaults, unet_like)
        if value is None and required:
            raise CannotBuild(f"{cls.__name__}.forward needs {p.name!r}, which no generic recipe makes")
        if value is not None:
            kwargs[p.name] = value
    return kwargs


# ---------------------------------------------------------------------------------------------
# the search and the entries
# ---------------------------------------------------------------------------------------------

@dataclass
class Recipe:
    config: dict
    layout: Layout
    with_extras: bool


@functools.lru_cache(maxsize=None)
def recipe(class_name: str) -> Recipe:
    """The first tiny config and input layout whose forward runs (see the module docstring)."""
    diffusers = zoo.library("diffusers")
    cls = getattr(diffusers, class_name)
    first_error: Optional[BaseException] = None
    for depth, fill_none in ((1, False), (1, True), (2, False)):
        config = tiny_config(cls, depth, fill_none)
        try:
            zoo.seed()
            net = cls(**config).eval()
        except Exception as exc:    # noqa: BLE001 - this config does not build: try the next
            first_error = first_error or exc
            continue
        zoo.check_parameters(zoo.parameter_count(net))
        for layout in _layouts(class_name):
            for with_extras in (False, True):
                try:
                    kwargs = inputs_for(cls, config, layout, with_extras)
                    zoo.call_quietly(net, **kwargs)
                    return Recipe(config, layout, with_extras)
                except CannotBuild:
                    raise
                except Exception as exc:     # noqa: BLE001 - these inputs do not fit: try the next
                    first_error = first_error or exc
    raise CannotBuild(f"no generic tiny config and inputs work: {zoo.describe_error(first_error)}")


def _entry(class_name: str) -> None:
    def build():
        diffusers = zoo.library("diffusers")
        found = recipe(class_name)
        cls = getattr(diffusers, class_name)
        net = zoo.build_within_limit(lambda: cls(**found.config))
        zoo.seed(1)
        return net, (), inputs_for(cls, found.config, found.layout, found.with_extras)

    zoo.register(f"diffusers.{class_name}", (), "diffusers",
                 f"diffusers.{class_name} with a tiny config derived from its constructor, inputs from its forward",
                 build)


def model_classes(diffusers) -> list:
    """Names of the ModelMixin subclasses diffusers exports (importing each lazily exported name)."""
    import warnings
    names = []
    verbosity = diffusers.utils.logging.get_verbosity()
    diffusers.utils.logging.set_verbosity_error()       # importing the exports logs notices ("experimental")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in sorted(dir(diffusers)):
                try:
                    value = getattr(diffusers, name)
                except Exception:       # noqa: BLE001 - an export whose optional backend is missing
                    continue
                if inspect.isclass(value) and issubclass(value, diffusers.ModelMixin) \
                        and value is not diffusers.ModelMixin:
                    names.append(name)
    finally:
        diffusers.utils.logging.set_verbosity(verbosity)
    return names


_diffusers = zoo.listing_import("diffusers", "diffusers")
if _diffusers is not None:
    for _name in model_classes(_diffusers):
        _entry(_name)
