//! The examples each `--help` ends with. Every `astrolabe` line here, except those of
//! `astra` (which need ASTRA-sim files) and those writing into the home folder, runs with
//! the built-in data: tests/docs_examples.rs runs them.

/// `astrolabe --help`.
pub const TOP: &str = "Examples:
  astrolabe estimate --model gpt3-175b --system dgx-a100 --gpus 1024 --tp 8 --pp 16 --global-batch 1536
  astrolabe sweep --model llama3-8b --system dgx-h100 --gpus 64 --global-batch 512 --top 5
  astrolabe collective all-reduce --system dgx-h100 --nodes 4 -b 8 -e 128M -f 4
  astrolabe list model";

/// `astrolabe estimate --help`.
pub const ESTIMATE: &str = "Examples:
  astrolabe estimate --model gpt3-175b --system dgx-a100 --gpus 1024 --tp 8 --pp 16 --global-batch 1536
  astrolabe estimate --model llama3-70b --system dgx-h100 --gpus 64 --tp 4 --pp 8 --virtual-stages 5 --global-batch 128 --format json
  astrolabe estimate --model llama3-8b --system dgx-h100 --gpus 8 --tp 4 --flash-attention false --explain

Defaults follow Megatron-LM/NeMo practice (flash attention, sequence parallelism when tp > 1,
TP overlap, distributed optimizer = ZeRO-1); the output names the ones used. A plan that does
not fit in memory is printed and exits with status 3.";

/// `astrolabe sweep --help`.
pub const SWEEP: &str = "Examples:
  astrolabe sweep --model llama3-8b --system dgx-h100 --gpus 64 --global-batch 512 --top 5
  astrolabe sweep --model gpt3-175b --system dgx-a100 --gpus 1024 --global-batch 1536 --tp 8 --flash-attention true --all all.csv -o top.csv

With nothing valid the sweep exits non-zero (3 when memory dropped the most, else 2) and names
the constraint that dropped the most configurations.";

/// `astrolabe collective --help`.
pub const COLLECTIVE: &str = "Examples:
  astrolabe collective all-reduce --size 1GiB --topology 'switch(8, 450GB/s, 3.4us) x switch(16, 50GB/s, 14us)'
  astrolabe collective all-reduce --system dgx-h100 --nodes 4 -b 8 -e 128M -f 4
  astrolabe collective all-gather --system dgx-a100 --size 8..128M --format csv";

/// `astrolabe compare --help`.
pub const COMPARE: &str = "Examples:
  astrolabe compare gpu-generations
  astrolabe compare --model llama2-13b --system dgx-a100 --system dgx-h100 --gpus 64 --tp 8 --global-batch 512
  astrolabe compare dp-vs-tp-vs-pp --format csv";

/// `astrolabe list --help`.
pub const LIST: &str = "Examples:
  astrolabe list
  astrolabe list model --format json";

/// `astrolabe show --help`.
pub const SHOW: &str = "Examples:
  astrolabe show system dgx-h100 > my-system.toml
  astrolabe show model llama3-70b";

/// `astrolabe astra --help`.
pub const ASTRA: &str = "Examples:
  astrolabe astra --network network.yml --system system.json --collective all-reduce --size 1GiB
  astrolabe astra --network network.yml --system system.json --workload traces/workload
(ASTRA-sim input files: see docs/astra-sim.md)";

/// `astrolabe export --help`.
pub const EXPORT: &str = "Examples:
  astrolabe export astra --out astra-in --model llama2-13b --system dgx-a100 --gpus 16 --tp 8 --pp 2 --global-batch 16";

/// `astrolabe schema --help`.
pub const SCHEMA: &str = "Examples:
  astrolabe schema estimate
  astrolabe schema sweep -o sweep.schema.json";

/// `astrolabe completions --help`.
pub const COMPLETIONS: &str = "Examples:
  astrolabe completions bash > ~/.local/share/bash-completion/completions/astrolabe
  astrolabe completions zsh > ~/.zfunc/_astrolabe
  astrolabe completions fish > ~/.config/fish/completions/astrolabe.fish";

/// `astrolabe man --help`.
pub const MAN: &str = "Examples:
  astrolabe man > astrolabe.1
  man ./astrolabe.1";
