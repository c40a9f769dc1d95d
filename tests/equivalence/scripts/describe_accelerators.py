"""Describe the attributes named on the command line on both Accelerators, as JSON.

Run in a subprocess (Hugging Face Accelerate keeps process-wide state): for each runtime
and attribute, its kind ("method", "value" or "missing") and, for methods, its parameters
(name, kind, default). Also the parameters of each Accelerator's constructor.
"""

import inspect
import json
import sys


def describe_callable(fn):
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [
        [p.name, p.kind.name, None if p.default is inspect.Parameter.empty else repr(p.default)]
        for p in signature.parameters.values()
        if p.name != "self"
    ]


def describe(accelerator, names):
    cls = type(accelerator)
    out = {"__init__": describe_callable(cls.__init__)}
    for name in names:
        try:
            static = inspect.getattr_static(cls, name)
        except AttributeError:
            static = None
        if isinstance(static, property) or (static is None and name in vars(accelerator)):
            out[name] = {"kind": "value"}
        elif static is not None and callable(getattr(accelerator, name, None)):
            out[name] = {"kind": "method", "params": describe_callable(getattr(accelerator, name))}
        elif static is not None:
            out[name] = {"kind": "value"}
        else:
            out[name] = {"kind": "missing"}
    return out


def main():
    names = sys.argv[1:]
    import accelerate

    import runtime

    ours = runtime.Accelerator(cpu=True)
    theirs = accelerate.Accelerator(cpu=True)
    print(json.dumps({"runtime": describe(ours, names), "accelerate": describe(theirs, names)}))


if __name__ == "__main__":
    main()
