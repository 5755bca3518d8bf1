"""The release and placement catalog: data in Baton's store, changed only through calls that log an event.

`changes` is the API (read the catalog, change it, list its changes since a
seq); `releases` is today's catalog of behavioral releases, which seeds the
store together with `baton.placements.DEFAULT_PLACEMENTS`.
"""
