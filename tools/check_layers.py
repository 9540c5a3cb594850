#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the compiler's includes against its layers (compiler/CMakeLists.txt).

The build writes a manifest of the layer libraries: `file <library> <source>` for each source and
`deps <library> <library>...` for the kiln_* libraries each links. A header belongs to the library
of the source with its stem in its folder, else to the library most of its folder's sources are
in. A file may include headers of its own library and of the libraries below it (the transitive
closure of `deps`); anything else -- an include upwards or sideways, say ops/ including passes/
or targets/cpu/ including targets/cuda/ -- fails with the file, the line and the two libraries.
Units (a folder and stem: x.h with x.cc) may not include each other in a circle either, which
keeps a lowering file from being both the caller and the callee of the program that runs it.
Tests (*_test.cc) and test helpers (*_testing.h, *_test_util.h) link everything and are not
checked.

Also: files under a `kernels/` folder include nothing from the compiler outside kernels/ (they
are the device code, built from plain parameters).

Exit status 0 when clean, 1 with one line per finding.
"""
import argparse
import collections
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"(compiler/[^"]+)"')
SOURCE_EXTS = ('.cc', '.cu')
CHECKED_EXTS = ('.h', '.cc', '.cu', '.cuh', '.inc')
# Where units may not include each other in a circle. Not ir/ and ops/: the op table includes
# every op and every op includes the table (ops/op_list.inc), by design.
CYCLE_CHECKED = ('compiler/targets/', 'compiler/runtime/', 'compiler/passes/', 'compiler/onnx/',
                 'compiler/quantize/', 'compiler/artifact/')


def is_test(path):
    name = os.path.basename(path)
    return name.endswith(('_test.cc', '_testing.h', '_test_util.h'))


def read_manifest(path):
    owner, deps = {}, collections.defaultdict(set)
    with open(path, encoding='utf-8') as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            if words[0] == 'file':
                owner[words[2]] = words[1]
            elif words[0] == 'deps':
                deps[words[1]].update(words[2:])
    return owner, deps


def closure(deps):
    below = {}

    def visit(lib, seen):
        if lib in below:
            return below[lib]
        if lib in seen:
            raise SystemExit(f'check_layers: the libraries link each other in a circle at {lib}')
        result = {lib}
        for d in deps.get(lib, ()):
            result |= visit(d, seen | {lib})
        below[lib] = result
        return result

    for lib in list(deps):
        visit(lib, frozenset())
    return below


def library_of(path, owner):
    """The library a compiler file belongs to, or None when no built library holds its folder."""
    if path in owner:
        return owner[path]
    folder, name = os.path.split(path)
    stem = name.split('.')[0]
    for ext in SOURCE_EXTS:
        candidate = f'{folder}/{stem}{ext}'
        if candidate in owner:
            return owner[candidate]
    counts = collections.Counter(lib for src, lib in owner.items()
                                 if os.path.dirname(src) == folder)
    return counts.most_common(1)[0][0] if counts else None


def compiler_files(root):
    for folder, _, names in os.walk(os.path.join(root, 'compiler')):
        for name in sorted(names):
            if name.endswith(CHECKED_EXTS):
                yield os.path.relpath(os.path.join(folder, name), root).replace(os.sep, '/')


def includes_of(root, path):
    with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1)


def check(root, manifest):
    owner, deps = read_manifest(manifest)
    below = closure(deps)
    findings = []
    unit_edges = collections.defaultdict(set)
    for path in compiler_files(root):
        if is_test(path):
            continue
        lib = library_of(path, owner)
        in_kernels = '/kernels/' in path
        for number, target in includes_of(root, path):
            if in_kernels and '/kernels/' not in target:
                findings.append(f'{path}:{number}: kernels/ includes {target}: device code takes '
                                'plain parameters, not the compiler\'s types')
            if unit(path) != unit(target):
                unit_edges[unit(path)].add(unit(target))
            if lib is None:
                continue
            theirs = library_of(target, owner)
            if theirs is None or theirs in below.get(lib, {lib}):
                continue
            linked = ', '.join(sorted(below.get(lib, {lib}) - {lib})) or 'nothing'
            findings.append(f'{path}:{number}: includes {target}, but {lib} may not use {theirs} '
                            f'({lib} links {linked}); move the code to the lower layer or pass it '
                            'in')
    findings += unit_cycles({u: e for u, e in unit_edges.items() if u.startswith(CYCLE_CHECKED)})
    return findings


def unit(path):
    """A file's unit: its folder and stem (x.h, x.cc and x.cu are one unit)."""
    return path.split('.')[0]


def unit_cycles(edges):
    """One finding per circle of units including each other's headers."""
    findings, state, stack = [], {}, []

    def visit(h):
        state[h] = 'open'
        stack.append(h)
        for t in sorted(edges.get(h, ())):
            if state.get(t) == 'open':
                circle = stack[stack.index(t):] + [t]
                findings.append('include circle: ' + ' -> '.join(circle))
            elif t not in state:
                visit(t)
        stack.pop()
        state[h] = 'done'

    for h in sorted(edges):
        if h not in state:
            visit(h)
    return findings


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--root', required=True, help='the source tree')
    parser.add_argument('--manifest', required=True, help='layers.txt the build wrote')
    args = parser.parse_args()
    findings = check(args.root, args.manifest)
    for f in findings:
        print(f'check_layers: {f}', file=sys.stderr)
    return 1 if findings else 0


if __name__ == '__main__':
    sys.exit(main())
