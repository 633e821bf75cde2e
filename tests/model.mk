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
