"""The public API is fully annotated (the package ships py.typed, PEP 561):
every parameter and return of every public function and method of every name
in vyre_cuda.__all__ (enums aside: their members are their API)."""
import enum
import inspect
import unittest

import vyre_cuda


def _public_functions():
    for name in vyre_cuda.__all__:
        obj = getattr(vyre_cuda, name)
        if inspect.isclass(obj):
            if issubclass(obj, enum.Enum) or issubclass(obj, BaseException):
                continue
            for member_name, member in vars(obj).items():
                if member_name.startswith("_") and member_name not in (
                        "__init__", "__enter__", "__exit__"):
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member):
                    yield f"{name}.{member_name}", member
        elif inspect.isfunction(obj):
            yield name, obj


class PublicApiAnnotationsTest(unittest.TestCase):
    def test_every_parameter_and_return_is_annotated(self):
        missing = []
        for qualname, function in _public_functions():
            signature = inspect.signature(function)
            for parameter in signature.parameters.values():
                if parameter.name in ("self", "cls"):
                    continue
                if parameter.annotation is inspect.Parameter.empty:
                    missing.append(f"{qualname}({parameter.name})")
            if signature.return_annotation is inspect.Signature.empty:
                missing.append(f"{qualname} -> ?")
        self.assertEqual(missing, [], "public functions without annotations: "
                         "annotate them (the package is typed: py.typed)")

    def test_the_package_is_marked_typed(self):
        import os
        marker = os.path.join(os.path.dirname(vyre_cuda.__file__), "py.typed")
        self.assertTrue(os.path.exists(marker), marker)


if __name__ == "__main__":
    unittest.main()
