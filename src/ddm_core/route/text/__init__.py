"""The SQL text: reading the caller's statement in, and cutting it into rewrite templates.

* :mod:`.placeholders` — DB-API placeholders (``%s``, ``%(name)s``, ``?``) → numbered
  ``:pN`` that sqlglot parses, executable comments read as the server reads them.
* :mod:`.statement_parser` — sqlglot's MySQL parser, one per thread.
* :mod:`.parse_errors` — sqlglot's parse errors in the caller's words, with a caret.
* :mod:`.sql_hint` — ShardingSphere's ``/* SHARDINGSPHERE_HINT: ... */`` opening a statement.
* :mod:`.template` — SQL text with slots for physical tables and parameters, filled per call.
* :mod:`.edits` — where tables, schema qualifiers and placeholders sit in the text.
"""
