libsycore_a_SOURCES += core/model/model.h core/model/safetensors.h
