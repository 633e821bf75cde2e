# model tests: the safetensors reader, config parsing and binding errors on
# synthetic checkpoints, and the real checkpoints in $SY_SHARED_DIR/models.
SY_MODEL_TEST_UTIL = tests/unit/test_model_util.c tests/unit/test_model_util.h

check_PROGRAMS += tests/unit/test_safetensors tests/unit/test_model_errors tests/unit/test_model
TESTS += tests/unit/test_safetensors tests/unit/test_model_errors tests/unit/test_model

tests_unit_test_safetensors_SOURCES = tests/unit/test_safetensors.c $(SY_MODEL_TEST_UTIL)
tests_unit_test_safetensors_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_safetensors_LDADD = $(SY_CORE_LIBS)

tests_unit_test_model_errors_SOURCES = tests/unit/test_model_errors.c $(SY_MODEL_TEST_UTIL)
tests_unit_test_model_errors_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_model_errors_LDADD = $(SY_CORE_LIBS)

tests_unit_test_model_SOURCES = tests/unit/test_model.c $(SY_MODEL_TEST_UTIL)
tests_unit_test_model_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_model_LDADD = $(SY_CORE_LIBS)

# config.json's two layouts (older top-level keys, transformers 5's rope_parameters) and their precedence.
check_PROGRAMS += tests/unit/test_model_config_layouts
TESTS += tests/unit/test_model_config_layouts
tests_unit_test_model_config_layouts_SOURCES = tests/unit/test_model_config_layouts.c $(SY_MODEL_TEST_UTIL)
tests_unit_test_model_config_layouts_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_model_config_layouts_LDADD = $(SY_CORE_LIBS)
# Which layers slide (Qwen2 / Qwen3 windows, layer_types) and the Qwen attention flags.
check_PROGRAMS += tests/unit/test_model_windows
TESTS += tests/unit/test_model_windows
tests_unit_test_model_windows_SOURCES = tests/unit/test_model_windows.c $(SY_MODEL_TEST_UTIL)
tests_unit_test_model_windows_CPPFLAGS = $(libsycore_a_CPPFLAGS)
tests_unit_test_model_windows_LDADD = $(SY_CORE_LIBS)
