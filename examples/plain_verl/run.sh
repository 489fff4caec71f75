#!/usr/bin/env bash
# One GRPO step of verl-parl's `parl_swarm` orchestrator loop inside a plain verl run, on CPU:
# verl's own `python -m verl.trainer.main_ppo` with overrides only (no verl_parl.cli.main, no parl_trainer.yaml).
# Installing verl-parl registers it in verl's `verl.plugins` entry-point group, so `import verl` (driver
# and every Ray worker) loads the CPU platform, the `hf` rollout server, the `parl_swarm` agent loop,
# the `parl` reward manager and the `parl_sync` trainer mode.
#
#   bash examples/plain_verl/run.sh [OUT_DIR] [more Hydra overrides...]
#
# Takes ~3 minutes on 2 cores once the cold-start model is cached (building it first takes a few more).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-$here/outputs}" && cd "${1:-$here/outputs}" && pwd)"
shift || true
PYTHON="${PYTHON:-python}"

# verl's `cpu` platform (verl-parl's), never a hub download, a private Ray cluster (never a running one).
export VERL_PLATFORM=cpu HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false TQ_NUM_THREADS="${TQ_NUM_THREADS:-2}"
unset RAY_ADDRESS

# TRAIN, VAL, TOOLS, MODEL, REWARD_FN: the arithmetic task's rows (agent_name: parl_swarm), its tool
# config, the cold-start tiny model and verl-parl's compute_score.
eval "$("$PYTHON" "$here/prepare.py" --out "$out")"

overrides=(
  # --- the task: verl parquet rows that name the parl_swarm agent loop
  data.train_files="$TRAIN"
  data.val_files="$VAL"
  data.train_batch_size=2
  data.max_prompt_length=512
  data.max_response_length=256
  data.dataloader_num_workers=0
  # --- the model: verl-parl's offline tiny Qwen2 after its arithmetic cold start
  actor_rollout_ref.model.path="$MODEL"
  # --- the CPU profile (configs/profile/cpu.yaml): sdpa attention, FSDP2 in fp32, no torch.compile
  trainer.device=cpu
  trainer.n_gpus_per_node=1
  +actor_rollout_ref.model.override_config.attn_implementation=sdpa
  actor_rollout_ref.actor.strategy=fsdp2
  actor_rollout_ref.actor.use_torch_compile=false
  actor_rollout_ref.actor.fsdp_config.strategy=fsdp2
  actor_rollout_ref.actor.fsdp_config.dtype=float32
  +actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp32
  +actor_rollout_ref.actor.fsdp_config.mixed_precision.reduce_dtype=fp32
  +actor_rollout_ref.actor.fsdp_config.mixed_precision.buffer_dtype=fp32
  actor_rollout_ref.actor.fsdp_config.use_torch_compile=false
  actor_rollout_ref.ref.fsdp_config.strategy=fsdp2
  actor_rollout_ref.ref.fsdp_config.dtype=float32
  actor_rollout_ref.ref.fsdp_config.use_torch_compile=false
  # --- rollout: verl-parl's batched HF server, multi-turn tool calls, our calculator tool
  actor_rollout_ref.rollout.name=hf
  actor_rollout_ref.rollout.tensor_model_parallel_size=1
  actor_rollout_ref.rollout.agent.num_workers=1
  actor_rollout_ref.rollout.agent.default_agent_loop=parl_swarm
  actor_rollout_ref.rollout.n=2
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4
  actor_rollout_ref.rollout.multi_turn.enable=true
  actor_rollout_ref.rollout.multi_turn.format=hermes
  actor_rollout_ref.rollout.multi_turn.tool_config_path="$TOOLS"
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4
  # --- the update: GRPO, small batches
  algorithm.adv_estimator=grpo
  actor_rollout_ref.actor.ppo_mini_batch_size=2
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4
  actor_rollout_ref.actor.optim.lr=1e-4
  # --- the swarm: subagents get the calculator; their frozen server is the same checkpoint
  +parl.swarm.subagent_tools=[calculator]
  # --- our reward: PARL's staged reward over the number_match scorer (needs the parl_sync trainer mode)
  reward.reward_manager.name=parl
  reward.custom_reward_function.path="$REWARD_FN"
  reward.custom_reward_function.name=compute_score
  +reward.custom_reward_function.reward_kwargs.scorer=number_match
  reward.num_workers=1
  trainer.v1.trainer_mode=parl_sync
  # --- one step, no validation, no checkpoint; metrics on the console and in a JSONL file
  trainer.total_training_steps=1
  trainer.val_before_train=false
  trainer.test_freq=-1
  trainer.save_freq=-1
  trainer.logger=[console,file]
  trainer.project_name=verl_parl_examples
  trainer.experiment_name=plain_verl
  trainer.default_local_dir="$out/checkpoints"
  # --- Ray and TransferQueue on one machine: logical CPUs and one logical GPU per FSDP rank
  transfer_queue.enable=true
  transfer_queue.backend.SimpleStorage.num_data_storage_units=1
  ray_kwargs.ray_init.num_cpus=16
  +ray_kwargs.ray_init.num_gpus=1
  +ray_kwargs.ray_init.include_dashboard=false
)

cd "$out"
VERL_FILE_LOGGER_PATH="$out/metrics.jsonl" exec "$PYTHON" -m verl.trainer.main_ppo "${overrides[@]}" "$@"
