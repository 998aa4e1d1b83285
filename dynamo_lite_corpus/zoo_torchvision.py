"""The "torchvision" suite: every model of ``torchvision.models.list_models()``, registered as ``tv.<name>``.

Each model is built by its documented builder with ``weights=None`` (and ``weights_backbone=None``
where it takes one), every other argument left at its default, seeded, in eval mode, and called the
way its family's documentation calls it:

    classification, quantization   model(images)              images: 2 x 3 x H x W
    segmentation                   model(images)              returns {"out": ...}
    detection                      model([image, image])      a list of 3 x H x W images (eval mode)
    video                          model(clips)               clips: 2 x 3 x T x H x W
    optical_flow                   model(image1, image2)      two batches of 2 x 3 x H x W

(The quantization family is built as its documented default, ``quantize=False``: the float
``Quantizable*`` models with their quant/dequant stubs.)

Inputs are the smallest of a few candidate sizes that the model accepts, found by calling the
meta-built model on meta tensors. Models that fix their input size in the constructor get it
there too: ``image_size`` (ViT), ``input_size`` (MaxViT), ``spatial_size``/``temporal_size``
(MViT), and the detection models' ``min_size``/``max_size``, which otherwise resize every image to
800 pixels before the backbone. The parameter limit and the meta-device helpers are
`zoo_common`'s.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import torch.nn as nn

from . import zoo_common as zoo


def _images(size):
    return (torch.randn(zoo.BATCH, 3, size, size),)


def _image_list(size):
    return ([torch.randn(3, size, size) for _ in range(zoo.BATCH)],)


def _clips(size):
    frames, side = size
    return (torch.randn(zoo.BATCH, 3, frames, side, side),)


def _image_pairs(size):
    return (torch.randn(zoo.BATCH, 3, size, size), torch.randn(zoo.BATCH, 3, size, size))


@dataclass(frozen=True)
class Family:
    """One torchvision model family: where its builders live, how it is called, which sizes to try."""
    module: str                      # submodule of torchvision.models ("" for classification)
    inputs: Callable                 # size -> the call's positional arguments
    sizes: tuple                     # candidates, smallest first; the last is used when none passes on meta
    call: str                        # the documented call, for the entry's docstring


IMAGE_SIZES = (32, 48, 64, 96, 128, 160, 192, 224)
FAMILIES = {
    "classification": Family("", _images, IMAGE_SIZES, "model(2x3xHxW images)"),
    "quantization": Family("quantization", _images, IMAGE_SIZES, "model(2x3xHxW images), quantize=False"),
    "segmentation": Family("segmentation", _images, IMAGE_SIZES, "model(2x3xHxW images)['out']"),
    # detection post-processing depends on values (NMS, score thresholds): no meta trial, one size
    "detection": Family("detection", _image_list, (128,), "model([3xHxW image, 3xHxW image]) in eval mode"),
    "video": Family("video", _clips, ((4, 32), (4, 64), (8, 64), (8, 112), (16, 112), (16, 224)),
                    "model(2x3xTxHxW clips)"),
    "optical_flow": Family("optical_flow", _image_pairs, (64, 96, 128, 160, 224, 256),
                           "model(image1, image2), 2x3xHxW each"),
}


def _size_keywords(model_class: type, size) -> dict:
    """Constructor keywords that set the input size, for the classes that take one."""
    params = inspect.signature(model_class).parameters
    frames, side = size if isinstance(size, tuple) else (None, size)
    if "image_size" in params:
        return {"image_size": side}
    if "input_size" in params:
        return {"input_size": (side, side)}
    if "spatial_size" in params and "temporal_size" in params:
        return {"spatial_size": (side, side), "temporal_size": frames}
    if "min_size" in params and "max_size" in params:
        return {"min_size": side, "max_size": side}
    return {}


@dataclass
class Plan:
    kwargs: dict
    size: object
    meta: Optional[nn.Module] = field(default=None, repr=False)


@functools.lru_cache(maxsize=None)
def plan(name: str, family_name: str) -> Plan:
    """The constructor keywords and the smallest input size for `name`; CannotBuild over the parameter limit."""
    tv = zoo.library("torchvision")
    family = FAMILIES[family_name]
    builder = tv.models.get_model_builder(name)
    base = {"weights": None}
    if "weights_backbone" in inspect.signature(builder).parameters:
        base["weights_backbone"] = None

    def make(**kwargs):
        return lambda: builder(**base, **kwargs)

    meta = zoo.build_on_meta(make())
    if meta is None:
        return Plan(base, family.sizes[-1])
    zoo.check_parameters(zoo.parameter_count(meta))
    builds = {}

    def attempt(size):
        kwargs = _size_keywords(type(meta), size)
        net = zoo.build_on_meta(make(**kwargs)) if kwargs else meta
        if net is None:
            raise TypeError(f"cannot build with {kwargs}")
        zoo.call_quietly(net.eval(), *zoo.on_meta(family.inputs(size)))
        builds[size] = (kwargs, net)

    size, _ = zoo.first_that_works(family.sizes, attempt)
    if size is None:
        size = family.sizes[-1]
        kwargs = _size_keywords(type(meta), size)
        return Plan({**base, **kwargs}, size, None if kwargs else meta)
    kwargs, net = builds[size]
    return Plan({**base, **kwargs}, size, net)


def _entry(name: str, family_name: str) -> None:
    family = FAMILIES[family_name]

    def build():
        tv = zoo.library("torchvision")
        how = plan(name, family_name)
        net = zoo.build_within_limit(lambda: tv.models.get_model_builder(name)(**how.kwargs), how.meta)
        zoo.seed(1)
        return net, family.inputs(how.size)

    zoo.register(f"tv.{name}", (family_name, "vision"), "torchvision",
                 f"torchvision.models.{name}(weights=None), {family.call}, the smallest size it accepts", build)


def _families(tv) -> dict:
    """model name -> family, for every model torchvision lists."""
    family_of = {}
    for family_name, family in FAMILIES.items():
        module = getattr(tv.models, family.module) if family.module else tv.models
        for name in tv.models.list_models(module):
            family_of.setdefault(name, family_name)
    return family_of


_tv = zoo.listing_import("torchvision", "torchvision")
if _tv is not None:
    _family_of = _families(_tv)
    for _name in _tv.models.list_models():
        _entry(_name, _family_of.get(_name, "classification"))
