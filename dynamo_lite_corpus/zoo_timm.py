"""The "timm" suite: one model per name of ``timm.list_models()``, registered as ``timm.<name>``.

Listing imports timm and reads its model registry; nothing is built until a builder runs. A builder
makes ``timm.create_model(name, pretrained=False)`` (random weights, seeded, eval mode) and calls it
on a batch of 2 images of the smallest size the model accepts:

- the parameter count comes first, from a build on the meta device; a model over the zoo limit
  (`zoo_common.max_parameters`) is skipped with its count as the reason;
- the size: a model whose pretrained config has ``fixed_input_size`` (ViTs and other position-
  embedding models) is rebuilt with a smaller ``img_size`` where its constructor takes one, any
  other model keeps its constructor and gets smaller images; either way the candidate sizes are
  tried smallest first by calling the meta-built model on meta tensors, so the first one that
  passes the model's own shape checks wins. When no candidate passes on meta (the model computes
  with tensor values while tracing shapes), the config's input size is used.

Tags: "timm", "zoo" and the timm module that defines the model ("resnet", "vision_transformer", ...).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn as nn

from . import zoo_common as zoo

SIZES = (32, 48, 64, 96, 128, 160, 192, 224, 256, 288, 320, 384, 448, 512)


@dataclass
class Plan:
    """How to build and call one timm model: constructor keywords and the image shape (C, H, W)."""
    kwargs: dict
    image: tuple
    meta: Optional[nn.Module] = field(default=None, repr=False)    # the meta build, for the parameter count


def _config(timm, name: str) -> tuple:
    """(input (C, H, W), fixed_input_size, min_input_size) from the pretrained config."""
    cfg = timm.get_pretrained_cfg(name)
    cfg = cfg.to_dict() if cfg is not None else {}
    return tuple(cfg.get("input_size") or (3, 224, 224)), bool(cfg.get("fixed_input_size")), cfg.get("min_input_size")


def _candidates(default: tuple, minimum: Optional[tuple]) -> list:
    """(H, W) sizes to try, smallest first, ending with the configured one; W keeps the config's aspect ratio."""
    _, height, width = default
    low = minimum[1] if minimum else 0
    sizes = [(s, max(1, round(s * width / height))) for s in SIZES if low <= s < height]
    return sizes + [(height, width)]


@functools.lru_cache(maxsize=None)
def plan(name: str) -> Plan:
    """Find the smallest input `name` accepts (see the module docstring). Raises CannotBuild over the limit."""
    timm = zoo.library("timm")
    default, fixed, minimum = _config(timm, name)
    channels = default[0]

    def make(**kwargs):
        return lambda: timm.create_model(name, pretrained=False, **kwargs)

    meta = zoo.build_on_meta(make())
    if meta is None:                          # cannot trial sizes on meta: the config's size, checked after the build
        return Plan({}, default)
    zoo.check_parameters(zoo.parameter_count(meta))
    meta.eval()
    builds = {}

    def attempt(size):
        kwargs = {"img_size": size[0] if size[0] == size[1] else size} if fixed and size != default[1:] else {}
        net = zoo.build_on_meta(make(**kwargs)) if kwargs else meta
        if net is None:
            raise TypeError(f"cannot build with {kwargs}")
        zoo.call_quietly(net.eval(), torch.empty(zoo.BATCH, channels, *size, device="meta"))
        builds[size] = (kwargs, net)

    size, _ = zoo.first_that_works(_candidates(default, minimum), attempt)
    if size is None:
        return Plan({}, default, meta)
    kwargs, net = builds[size]
    return Plan(kwargs, (channels, *size), net)


def _entry(name: str, module: str) -> None:
    def build():
        timm = zoo.library("timm")
        how = plan(name)
        net = zoo.build_within_limit(lambda: timm.create_model(name, pretrained=False, **how.kwargs), how.meta)
        zoo.seed(1)
        return net, (torch.randn(zoo.BATCH, *how.image),)

    zoo.register(f"timm.{name}", (module,), "timm",
                 f"timm.create_model({name!r}, pretrained=False) on 2 images of the smallest size it accepts", build)


def _module_of(timm, name: str) -> str:
    """The timm module that defines `name` ("resnet", "vision_transformer", ...), from its entry point."""
    return timm.models.model_entrypoint(name).__module__.rsplit(".", 1)[-1]


_timm = zoo.listing_import("timm", "timm")
if _timm is not None:
    for _name in _timm.list_models():
        _entry(_name, _module_of(_timm, _name))
