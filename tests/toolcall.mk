# Tool-call tests: per-family parsers on recorded model text, family grammars.
