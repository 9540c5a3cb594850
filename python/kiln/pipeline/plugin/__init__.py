# SPDX-License-Identifier: Apache-2.0
"""Framework plugins: kiln.pipeline.plugin.pytorch (iterators yielding torch tensors)."""
