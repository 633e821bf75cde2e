# config (inih) and the plugin loader
