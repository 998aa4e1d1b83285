"""Guards: what a captured graph assumed about its inputs, checked before every reuse.

guards.py holds the guard kinds (frozen dataclasses over Sources that render as Python),
compile.py turns a guard set into one check function (and a verbose checker that names the
first failing guard).
"""
from .guards import (AliasMatch, AttrAbsent, CachedCallMatch, ClassAttrsMatch, ClassVersionMatch, ConstantMatch, DictKeysMatch, DistinctMatch, FunctionMatch,
                     GlobalStateMatch, Guard, IdMatch, KeyInMatch,
                     LengthMatch, MembershipMatch, RemainingMatch, NoHooksMatch, NoModesMatch, QueryMatch, ShapeEnvMatch, SubclassesMatch,
                     TensorMatch, TypeMatch, weakref_able)
from .compile import CompiledGuards, compile_guards

__all__ = ["Guard", "AttrAbsent", "TensorMatch", "TypeMatch", "IdMatch", "ConstantMatch", "LengthMatch", "RemainingMatch", "DictKeysMatch",
           "MembershipMatch", "KeyInMatch", "GlobalStateMatch", "NoHooksMatch", "AliasMatch", "DistinctMatch", "ShapeEnvMatch",
           "FunctionMatch", "ClassAttrsMatch", "ClassVersionMatch", "SubclassesMatch", "CachedCallMatch", "NoModesMatch", "QueryMatch", "weakref_able", "CompiledGuards",
           "compile_guards"]
