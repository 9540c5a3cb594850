# SPDX-License-Identifier: Apache-2.0
"""Writes fn.pyi, the typed stub of kiln.pipeline.fn, from the operator schemas (run by the
build: ``python3 -m kiln.pipeline._stubgen OUT.pyi``)."""

import sys

from kiln.pipeline import _schema


def _default(arg):
    return "..." if not arg["required"] else None


def _function(schema, indent):
    pad = " " * indent
    leaf = schema["name"].rsplit(".", 1)[-1]
    params = [f"{_schema.python_name(i)}: DataNode" for i in schema["inputs"]]
    if params:
        params.append("/")
    params.append("*")
    for arg in schema["args"]:
        annotation = _schema._PY_TYPES.get(arg["type"], "Any")
        if arg["per_sample"]:
            annotation += " | DataNode"
        default = "" if arg["required"] else f" = {arg['default']!r}"
        params.append(f"{_schema.python_name(arg['name'])}: {annotation}{default}")
    params += ["device: str | None = None", "**compat: Any"]
    n = len(schema["outputs"])
    result = "DataNode" if n == 1 else "tuple[" + ", ".join(["DataNode"] * n) + "]"
    doc = _schema.docstring(schema).rstrip().replace('"""', "'''")
    doc = "\n".join((pad + "    " + line).rstrip() if i else line
                    for i, line in enumerate(doc.split("\n")))
    return (f"{pad}def {leaf}({', '.join(params)}) -> {result}:\n"
            f'{pad}    """{doc}\n{pad}    """\n')


def generate():
    lines = ["# Generated from the C++ operator schemas by kiln.pipeline._stubgen; do not edit.",
             "from typing import Any, Sequence", "", "from kiln.pipeline.node import DataNode", ""]
    tree = {}
    for schema in _schema.schemas():
        *space, _ = schema["name"].split(".")
        tree.setdefault(".".join(space), []).append(schema)
    for schema in tree.pop("", []):
        lines.append(_function(schema, 0))
    for space, members in sorted(tree.items()):
        # One class per namespace (readers, decoders, random): attribute access as in fn.readers.
        lines.append(f"class {space.replace('.', '_')}:")
        for schema in members:
            lines.append("    @staticmethod")
            lines.append(_function(schema, 4))
    return "\n".join(lines)


if __name__ == "__main__":
    text = generate()
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        f.write(text)
