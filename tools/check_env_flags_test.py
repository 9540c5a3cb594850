# SPDX-License-Identifier: Apache-2.0
"""Tests of check_env_flags.py on small source trees written for each case."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_env_flags  # noqa: E402

TABLE = '''// the table
KILN_ENV_FLAG(kLogLevel, "KILN_LOG_LEVEL", "warning", "core", "log verbosity")
KILN_ENV_FLAG(kCudaThing, "KILN_CUDA_THING", "1", "cuda", "0 turns the thing off")
'''


class CheckEnvFlagsTest(unittest.TestCase):
    def check(self, files):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        files = dict(files)
        files.setdefault('core/env_flags.inc', TABLE)
        for path, text in files.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, 'w', encoding='utf-8') as f:
                f.write(text)
        return check_env_flags.check_sources(root, check_env_flags.read_table(root))

    def test_reads_through_the_table_are_clean(self):
        self.assertEqual(self.check({
            'core/env.cc': 'const char* v = std::getenv(info.variable.data());\n'
                           'std::getenv("KILN_LOG_LEVEL");  // the reader may\n',
            'compiler/targets/cuda/a.cc': 'bool on = env_flag_bool(EnvFlag::kCudaThing);\n'
                                          'setenv("KILN_CUDA_THING", "0", 1);\n',
            'python/kiln/x.py': 'import os\nlevel = os.environ.get("KILN_LOG_LEVEL")\n',
        }), [])

    def test_a_raw_getenv_fails_in_every_spelling(self):
        findings = self.check({
            'compiler/targets/cuda/lower.cc': 'int a;\nconst char* v = std::getenv("KILN_CUDA_THING");\n',
            'server/x.cc': 'auto v = ::getenv( "KILN_LOG_LEVEL");\n',
            'tools/y.cu': 'auto w = secure_getenv("KILN_LOG_LEVEL");\n',
            'pipeline/z.cc': 'auto u = getenv("KILN_LOG_LEVEL");\n',
        })
        self.assertEqual(len(findings), 4, findings)
        self.assertIn('compiler/targets/cuda/lower.cc:2: raw getenv("KILN_CUDA_THING")', findings[0])
        self.assertTrue(any(f.startswith('server/x.cc:1: raw getenv("KILN_LOG_LEVEL")')
                            for f in findings), findings)
        self.assertTrue(any(f.startswith('tools/y.cu:1: raw') for f in findings), findings)

    def test_a_variable_missing_from_the_table_fails(self):
        findings = self.check({
            'compiler/targets/cuda/kernels.cu':
                '// KILN_IN_A_COMMENT is not a read\n'
                '/* nor "KILN_IN_A_BLOCK_COMMENT"\n */\n'
                'char c = \'"\';\n'
                'auto v = env_flag_string(EnvFlag::kCudaThing);  // "KILN_CUDA_THING" is known\n'
                'const char* name = "KILN_NEW_KNOB";\n',
            'core/raw.cc': 'const char* src = R"x(\n  "quote" KILN_IN_RAW\n)x";\n',
        })
        self.assertEqual(len(findings), 2, findings)
        self.assertIn('compiler/targets/cuda/kernels.cu:6: KILN_NEW_KNOB is not in '
                      'core/env_flags.inc', findings[0] + findings[1])
        self.assertTrue(any(f.startswith('core/raw.cc:1: KILN_IN_RAW is not in') for f in findings),
                        findings)

    def test_python_strings_are_checked(self):
        findings = self.check({
            'python/tests/conftest.py': '# KILN_ONLY_A_COMMENT\n'
                                        'import os\n'
                                        'cli = os.environ.get("KILN_CLI", "kiln")\n'
                                        'msg = f"set {name} or KILN_OTHER"\n',
        })
        self.assertEqual(len(findings), 2, findings)
        self.assertTrue(findings[0].startswith('python/tests/conftest.py:3: KILN_CLI is not in'))
        self.assertTrue(findings[1].startswith('python/tests/conftest.py:4: KILN_OTHER is not in'))

    def test_names_that_are_no_variables_and_other_folders_are_left_alone(self):
        self.assertEqual(self.check({
            'compiler/targets/registry.cc': 'msg("rebuild with cmake -DKILN_CUDA=ON");\n',
            'bench/x.py': 'os.environ["KILN_BENCH_ONLY"]\n',
            'core/y.cc': 'KILN_RETURN_IF_ERROR(s); const char* f = "KILN_CUDA_THING=0";\n',
        }), [])

    def test_the_doc_markers_are_required(self):
        with self.assertRaises(SystemExit):
            check_env_flags.split_doc('# Debugging\nno markers\n', 'debugging.md')
        head, body, tail = check_env_flags.split_doc(
            f'# D\n{check_env_flags.BEGIN}\n| x |\n{check_env_flags.END}\nafter\n', 'd.md')
        self.assertEqual(body, '| x |\n')
        self.assertTrue(head.endswith(check_env_flags.BEGIN + '\n'))
        self.assertTrue(tail.startswith(check_env_flags.END))

    def test_this_tree_is_clean(self):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        table = check_env_flags.read_table(root)
        self.assertIn('KILN_CACHE_DIR', table)
        self.assertEqual(check_env_flags.check_sources(root, table), [])


if __name__ == '__main__':
    unittest.main()
