#pragma once
// Keep in step with pyproject.toml (tests/python/test_runtime.py checks they agree).
#define TILEWRIGHT_VERSION "0.1.0"
