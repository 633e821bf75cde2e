libsycore_a_SOURCES += core/model/model.h core/model/safetensors.h \
	core/model/safetensors.c \
	core/model/model_json.c core/model/model_json.h \
	core/model/model_arch.c core/model/model_arch.h \
	core/model/model_config.c \
	core/model/model_load.c \
	core/model/model_gptoss.c \
	core/model/model_quant.c core/model/model_quant.h \
	core/model/load_progress.c core/model/load_progress.h
