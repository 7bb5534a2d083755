"""``trainlint server``: a Language Server Protocol server over stdio (needs ``trainlint[server]``).

One job per module:

- ``command``: the click command; checks that pygls is installed before anything imports it.
- ``analysis``: one document's check, from the editor's unsaved text, under the configuration the
  CLI finds for that file, by the engine and cache the CLI uses.
- ``translate``: findings into LSP diagnostics, hovers and text edits (plain JSON-shaped dicts).
- ``noqa``: where a ``# noqa: TLnnn`` comment goes so that suppression.py reads it.
- ``store``: what each analysed document reported, by the file it is in.
- ``protocol``: the pygls wiring (the only module that imports pygls).

Everything but ``protocol`` is importable and testable without pygls.
"""
