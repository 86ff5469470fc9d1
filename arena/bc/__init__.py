"""Behaviour cloning (`arena bc`): the checkpoint RL starts from, shared by every backend.

train.py (demonstrations, SFT, the cached checkpoint and its report), key.py (the checkpoint's
cache key; torch-free, so the sweep driver can group cells without importing torch), stop.py
(the validation-band stopping rule). Submodules are imported explicitly, so importing this
package stays cheap.
"""
