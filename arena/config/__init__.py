"""Run configuration: the Hydra schema (`schema.py`) and loading/validation (`load.py`)."""
from .load import BadConfig, cell_id, check_env_available, config_dir, load_config, resolve_po, to_plain, trains_bc, without_hashed_defaults

__all__ = ["BadConfig", "cell_id", "check_env_available", "config_dir", "load_config", "resolve_po", "to_plain", "trains_bc", "without_hashed_defaults"]
