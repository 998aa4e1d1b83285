"""Symbolic values: one class per kind of Python object the tracer models.

The protocol every value follows is in `base.py`; each other module holds one family of kinds
with all their semantics (attributes, calls, operators, iteration, how generated code rebuilds
them):

    base.py          Value, Const, NULL, MethodValue, IteratorValue, LazyValue
    tensors.py       TensorValue, SymValue, SliceValue; torch calls as graph nodes
    containers.py    SeqValue (tuple/list/namedtuple/Size), DictValue (dict/OrderedDict) and its views,
                     SetValue (set/frozenset), live iterators over them
    stdlib_collections.py  DefaultDictValue, CounterValue, DequeValue; their constructors,
                     dict.fromkeys, namedtuple._make; existing containers read from the frame
    functions.py     FunctionValue, ClosureValue, CellValue (calls are inlined)
    objects.py       ObjectValue, NewObjectValue, NewExceptionValue, SuperValue
    dict_objects.py  dict / OrderedDict subclass instances (transformers' ModelOutput)
    modules.py       ModuleValue, NewModuleValue (torch.nn)
    contexts.py      GradModeValue, AutocastValue (with blocks)
    numpy_shadows.py placeholder arrays giving eager numpy's answer about traced arrays
    arrays.py        ArrayValue (numpy arrays and scalars: folded from constants, or graph tensors)
    numpy_functions.py  numpy functions, Tensor.numpy(), array <-> tensor conversions, frame arrays
    callables.py     CallableValue (builtins, C functions, classes: construction)
    strings.py       FormattedString (an f-string with tensor fields, formatted after the graph)

Modules import each other only downwards in that list; anything above them (wrapping a real
object, inlining a call, the graph) they reach through the interpreter frame they are given.
This package's __init__ imports nothing, so importing one module does not import them all.
"""
