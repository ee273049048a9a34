import badSplitOverlap from '../../../../examples/bad-split-overlap.yaml?raw';
import demo from '../../../../examples/demo.yaml?raw';
import multinodeTp from '../../../../examples/multinode-tp.yaml?raw';

/** Starting points for the Plan page: the repository's example configs and a Relax command line. */
export const PLAN_EXAMPLES: ReadonlyArray<{ name: string; text: string }> = [
  { name: 'demo.yaml (colocated defer, 2 x 8 GPUs)', text: demo },
  { name: 'multinode-tp.yaml', text: multinodeTp },
  { name: 'bad-split-overlap.yaml (invalid)', text: badSplitOverlap },
  {
    name: 'Relax flags (colocated rollout)',
    text: `python train.py \\
  --resource '{"actor": [1, 8], "rollout": [1, 8]}' \\
  --colocate --offload \\
  --rollout-num-gpus-per-engine 2 \\
  --hf-checkpoint /models/qwen3-8b`,
  },
];
