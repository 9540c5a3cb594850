# SPDX-License-Identifier: Apache-2.0
# pytest markers for the model tests.
def pytest_configure(config):
    config.addinivalue_line("markers", "large: slow models (DenseNet, Inception, ViT) in the `large` ctest label")
