"""What a submission becomes before the runner gives it to an engine: the sealed store.

A participant's engine and speculator are untrusted bytes. This package puts them on disk and
keeps them there unchanged: `archive.py` extracts an archive without ever writing through a link,
`trees.py` walks and removes trees of any depth without recursion, `store.py` seals a tree
content-addressed and read-only and re-hashes it before use, `plugins.py` installs an engine's
`plugin/` wheels offline and refuses anything else. The front door's intake (which fills the
store) and the runner (which verifies and unpacks what it gives the engine) both use it, so it
sits below both; `refusal.py` is the refusal every check raises, with the HTTP status the API
answers with.
"""
