"""Validates constrained-decoding outputs with the jsonschema package.

Usage: jsonschema_oracle.py CASES.jsonl

Each line is {"schema": S, "texts": [T, ...], "valid": true|false}. Every
text must parse as JSON; valid says whether each must validate against S
(Draft 2020-12, formats checked). time and date-time are checked here when
jsonschema has no checker for them (it needs rfc3339-validator). Prints
every disagreement and exits 1 if there is one, 2 on a usage error.
"""
import json
import re
import sys

try:
    import jsonschema
except ImportError as e:  # the test must fail, never skip
    print(f"jsonschema_oracle: cannot import jsonschema ({e}); set PYTHON_JSONSCHEMA to a python that has it",
          file=sys.stderr)
    sys.exit(2)

import datetime

RFC3339_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|z|[+-]([01]\d|2[0-3]):[0-5]\d)$")


def check_time(s):
    if not isinstance(s, str):
        return True
    return bool(RFC3339_TIME.match(s))


def check_date_time(s):
    if not isinstance(s, str):
        return True
    if len(s) < 11 or s[10] not in "Tt":
        return False
    try:
        datetime.date.fromisoformat(s[:10])
    except ValueError:
        return False
    return check_time(s[11:])


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    if "time" not in checker.checkers:
        checker.checks("time")(check_time)
    if "date-time" not in checker.checkers:
        checker.checks("date-time")(check_date_time)
    bad = 0
    n = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            case = json.loads(line)
            schema = case["schema"]
            validator = jsonschema.Draft202012Validator(schema, format_checker=checker)
            for text in case["texts"]:
                n += 1
                try:
                    doc = json.loads(text)
                except ValueError as e:
                    bad += 1
                    print(f"case {lineno}: not JSON ({e}): {text!r}\n  schema: {json.dumps(schema)}")
                    continue
                errors = list(validator.iter_errors(doc))
                if case["valid"] and errors:
                    bad += 1
                    print(f"case {lineno}: the grammar accepted an invalid document: {text!r}\n"
                          f"  schema: {json.dumps(schema)}\n  jsonschema: {errors[0].message}")
                elif not case["valid"] and not errors:
                    bad += 1
                    print(f"case {lineno}: expected invalid, but jsonschema accepts: {text!r}\n"
                          f"  schema: {json.dumps(schema)}")
    if n == 0:
        print("jsonschema_oracle: no texts to check", file=sys.stderr)
        return 1
    print(f"jsonschema_oracle: {n} texts, {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
