# frontend/http: the OpenAI-compatible API over HTTP/2 and HTTP/1.1.
# Links nghttp2, OpenSSL and jansson, never the core.
plugin_LTLIBRARIES += plugins/frontend/http/sy-frontend-http.la
plugins_frontend_http_sy_frontend_http_la_SOURCES = \
	plugins/frontend/http/http.h \
	plugins/frontend/http/http_buf.c \
	plugins/frontend/http/http_plugin.c \
	plugins/frontend/http/http_loop.c \
	plugins/frontend/http/http_tls.c \
	plugins/frontend/http/http_h1.c \
	plugins/frontend/http/http_h2.c \
	plugins/frontend/http/http_stream.c \
	plugins/frontend/http/http_routes.c \
	plugins/frontend/http/http_openai.c \
	plugins/frontend/http/http_openai.h \
	plugins/frontend/http/http_openai_fields.c \
	plugins/frontend/http/http_openai_chat.c \
	plugins/frontend/http/http_openai_format.c \
	plugins/frontend/http/http_job.c \
	plugins/frontend/http/http_anthropic.c \
	plugins/frontend/http/http_anthropic_out.c
plugins_frontend_http_sy_frontend_http_la_CPPFLAGS = $(AM_CPPFLAGS)
plugins_frontend_http_sy_frontend_http_la_CFLAGS = $(SY_PLUGIN_CFLAGS) $(NGHTTP2_CFLAGS) $(OPENSSL_CFLAGS) $(JANSSON_CFLAGS)
plugins_frontend_http_sy_frontend_http_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_frontend_http_sy_frontend_http_la_LIBADD = $(NGHTTP2_LIBS) $(OPENSSL_LIBS) $(JANSSON_LIBS) -lpthread -lm
