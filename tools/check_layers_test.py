# SPDX-License-Identifier: Apache-2.0
"""Tests of check_layers.py on small source trees written for each case."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_layers  # noqa: E402

MANIFEST = """deps lo kiln_core
deps mid lo
deps side lo
deps top mid side
file lo compiler/ir/graph.cc
file mid compiler/passes/fold.cc
file side compiler/targets/cpu/conv.cc
file side compiler/targets/cpu/kernels/tile.cc
file top compiler/artifact/artifact.cc
"""


class CheckLayersTest(unittest.TestCase):
    def tree(self, files):
        root = tempfile.mkdtemp()
        for path, text in files.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, 'w', encoding='utf-8') as f:
                f.write(text)
        manifest = os.path.join(root, 'layers.txt')
        with open(manifest, 'w', encoding='utf-8') as f:
            f.write(MANIFEST)
        return check_layers.check(root, manifest)

    def base(self):
        return {
            'compiler/ir/graph.h': '#pragma once\n',
            'compiler/ir/graph.cc': '#include "compiler/ir/graph.h"\n',
            'compiler/passes/fold.h': '#include "compiler/ir/graph.h"\n',
            'compiler/passes/fold.cc': '#include "compiler/passes/fold.h"\n',
            'compiler/targets/cpu/conv.h': '#include "compiler/ir/graph.h"\n',
            'compiler/targets/cpu/conv.cc': '#include "compiler/targets/cpu/conv.h"\n'
                                            '#include "compiler/targets/cpu/kernels/tile.h"\n',
            'compiler/targets/cpu/kernels/tile.h': '#pragma once\n',
            'compiler/targets/cpu/kernels/tile.cc': '#include "compiler/targets/cpu/kernels/tile.h"\n',
            'compiler/artifact/artifact.cc': '#include "compiler/passes/fold.h"\n'
                                             '#include "compiler/targets/cpu/conv.h"\n',
        }

    def test_a_tree_that_follows_the_layers_is_clean(self):
        self.assertEqual(self.tree(self.base()), [])

    def test_an_include_upwards_fails(self):
        files = self.base()
        files['compiler/ir/graph.cc'] += '#include "compiler/passes/fold.h"\n'
        findings = self.tree(files)
        self.assertEqual(len(findings), 1, findings)
        self.assertIn('compiler/ir/graph.cc:2: includes compiler/passes/fold.h, but lo may not use '
                      'mid', findings[0])

    def test_an_include_sideways_fails(self):
        files = self.base()
        files['compiler/passes/fold.cc'] += '#include "compiler/targets/cpu/conv.h"\n'
        findings = self.tree(files)
        self.assertTrue(any('mid may not use side' in f for f in findings), findings)

    def test_a_header_belongs_to_the_library_of_its_source(self):
        files = self.base()
        # passes/fold.h has no library of its own but fold.cc's: including it from ir is upwards.
        files['compiler/ir/graph.h'] = '#include "compiler/passes/fold.h"\n'
        self.assertTrue(any('lo may not use mid' in f for f in self.tree(files)))

    def test_a_circle_of_units_fails(self):
        files = self.base()
        files['compiler/targets/cpu/lower.h'] = '#include "compiler/targets/cpu/conv.h"\n'
        files['compiler/targets/cpu/conv.h'] += '#include "compiler/targets/cpu/lower.h"\n'
        findings = self.tree(files)
        self.assertTrue(any(f.startswith('include circle: compiler/targets/cpu/conv -> '
                                         'compiler/targets/cpu/lower -> compiler/targets/cpu/conv')
                            for f in findings), findings)

    def test_kernels_include_nothing_from_the_compiler_outside_kernels(self):
        files = self.base()
        files['compiler/targets/cpu/kernels/tile.cc'] += '#include "compiler/ir/graph.h"\n'
        findings = self.tree(files)
        self.assertEqual(len(findings), 1, findings)
        self.assertIn('kernels/ includes compiler/ir/graph.h', findings[0])

    def test_tests_are_not_checked(self):
        files = self.base()
        files['compiler/ir/graph_test.cc'] = '#include "compiler/artifact/artifact.h"\n'
        self.assertEqual(self.tree(files), [])


if __name__ == '__main__':
    unittest.main()
