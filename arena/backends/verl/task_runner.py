"""verl's TaskRunner (verl/trainer/main_ppo_v0.py) with arena's trainer class.

verl 0.9.1's `TaskRunner.run` hard-codes `RayPPOTrainer`; this runner is the same sequence
(worker roles, resource pools, tokenizer, datasets, `init_workers`, `fit`) with
`arena.backends.verl.trainer.ArenaRayPPOTrainer`, given arena's own settings (run writer,
seed, mini-batch split) from the run folder's config.yaml, found through $ARENA_RUN_DIR
(run_folder.arena_trainer_kwargs); the trainer reads the run's resolved PO from the verl
config itself (policy_loss.resolved_po). It runs as a Ray actor, which is verl's
"driver" process: advantages are computed there, so arena's estimators and loss are registered
in it first. Datasets come from verl's `create_rl_dataset` (`data.custom_cls` selects a dataset
class from the config). Imports verl and ray: import this module only where they are installed.
"""
from __future__ import annotations

import os
import socket

import ray
from omegaconf import OmegaConf
from verl.trainer.main_ppo_v0 import BaseTaskRunner

from . import register
from .run_folder import arena_trainer_kwargs


class ArenaTaskRunner(BaseTaskRunner):
    def run(self, config):
        from pprint import pprint

        from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler, need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.utils.dataset.rl_dataset import collate_fn

        # lazy: keeps hydra and arena's trainer (the model kit) out of this module's import until the actor runs
        from .trainer import ArenaRayPPOTrainer

        register()
        print(f"ArenaTaskRunner hostname: {socket.gethostname()}, PID: {os.getpid()}")
        pprint(OmegaConf.to_container(config, resolve=True))
        OmegaConf.resolve(config)
        actor_rollout_cls, ray_worker_group_cls = self.add_actor_rollout_worker(config)
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        self.add_teacher_model_resource_pool(config)
        self.add_ref_policy_worker(config, actor_rollout_cls)
        validate_config(config=config, use_reference_policy=need_reference_policy(config),
                        use_critic=need_critic(config))
        model_config = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        tokenizer, processor = model_config.tokenizer, model_config.processor
        resource_pool_manager = self.init_resource_pool_mgr(config)
        train_dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, processor, is_train=True,
                                          max_samples=config.data.get("train_max_samples", -1))
        val_dataset = create_rl_dataset(config.data.val_files, config.data, tokenizer, processor, is_train=False,
                                        max_samples=config.data.get("val_max_samples", -1))
        trainer = ArenaRayPPOTrainer(
            **arena_trainer_kwargs(os.environ["ARENA_RUN_DIR"]), config=config, tokenizer=tokenizer, processor=processor, role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=resource_pool_manager, ray_worker_group_cls=ray_worker_group_cls,
            train_dataset=train_dataset, val_dataset=val_dataset, collate_fn=collate_fn,
            train_sampler=create_rl_sampler(config.data, train_dataset),
        )
        trainer.init_workers()
        trainer.fit()


RemoteArenaTaskRunner = ray.remote(ArenaTaskRunner)
