# Grammar tests: GBNF, JSON schema and regex compilers, matcher, token masks.
