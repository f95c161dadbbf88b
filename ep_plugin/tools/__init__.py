"""The tools behind the `optim` command's verbs that run models on OptimEP: `run` (runner), `bench`
(benchmark, bench_peers, bench_report, bench_plot), `profile` (profile, profile_report) and `doctor`.

They build on the runtime one level up (optim.ep_plugin: sessions, placement, inputs, timing), which
never imports them: embedding applications and the other stages (the optimizer, the quantizer) use the
runtime alone. bench_plot needs matplotlib and is imported only to plot.
"""
