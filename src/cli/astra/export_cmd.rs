//! `astrolabe export astra`: a collective microbenchmark, or one training iteration of a
//! scenario, as ASTRA-sim input files.

use super::{ExportArgs, ExportTarget, parse_op, parse_size};
use crate::astra::model::{self, Knobs};
use crate::astra::network_yaml::AstraNetwork;
use crate::astra::system_json::AstraSystem;
use crate::astra::{critical, export, iteration, trace};
use crate::error::{Error, Result};
use crate::estimate::scenario::{Scenario, ScenarioSpec};
use crate::network::Topology;
use crate::report::{Cell, Report, Table};
use std::path::{Path, PathBuf};

/// The scenario of `export astra --scenario FILE` or `--model M --system S`, with the plan
/// flags applied over it (as `astrolabe estimate` does).
fn scenario(a: &super::ExportAstraArgs) -> Result<Option<Scenario>> {
    let (mut spec, base) = match (&a.scenario, &a.model) {
        (Some(path), _) => {
            let text = crate::limits::read_text(path)?;
            let s: ScenarioSpec = crate::catalog::parse_toml(&text, path)?;
            (s, path.parent().unwrap_or(Path::new(".")).to_path_buf())
        }
        (None, Some(model)) => {
            let system = a.system.as_ref().ok_or_else(|| {
                Error::input("--system", "required with --model (a preset name or TOML)")
            })?;
            let s = ScenarioSpec {
                model: model.clone(),
                system: system.display().to_string(),
                tokens: None,
                plan: crate::parallel::PlanSpec::practice(),
            };
            (s, PathBuf::from("."))
        }
        (None, None) => return Ok(None),
    };
    spec.plan = a.plan.apply(spec.plan)?;
    let sc = Scenario::from_spec(&spec, &base);
    match &a.scenario {
        Some(p) => sc.map(Some).map_err(|e| e.context(p.display())),
        None => sc.map(Some),
    }
}

/// `export astra --scenario`: one training iteration, with our two estimates beside it.
fn export_scenario(sc: &Scenario, out: &Path) -> Result<Report> {
    // Our estimate first: a plan it refuses is refused before anything is written, and an
    // offloaded plan's transfers are its.
    let ours = crate::estimate::evaluate(&sc.model, &sc.system, &sc.plan)?;
    let generator = if sc.plan.offload.any() {
        let (cost, tiers) = (&ours.time.offload, &sc.system.tiers);
        iteration::Generator::offloaded(&sc.model, &sc.plan, cost, tiers)?
    } else {
        iteration::Generator::new(&sc.model, &sc.plan)?
    };
    let net = export::network_from_topology(&sc.system.topology);
    let mut sys = export::iteration_system(net.dims.len(), &sc.system.device, sc.plan.precision)?;
    sys.remote = generator.remote_memory().clone();
    let groups: std::collections::HashMap<String, Vec<u32>> = generator
        .groups()
        .into_iter()
        .map(|(id, m)| (id.to_string(), m))
        .collect();
    let knobs = Knobs::default();
    let ctx = trace::Ctx {
        net: &net,
        sys: &sys,
        knobs: &knobs,
        groups: Some(&groups),
    };
    // Read the written files back before they are moved into place: the estimate below is
    // of exactly what was exported, and a trace our reader refuses is not left behind.
    let (written, (w, est)) = export::write_iteration(out, &net, &sys, &generator, |prefix| {
        let w = trace::load(prefix, &ctx)?;
        let est = critical::critical_path(&w)?;
        Ok((w, est))
    })?;
    let mut t = Table::new("files", &[("file", "file")]);
    for f in &written.files {
        t.push(vec![Cell::text(f.display().to_string())])?;
    }
    let mut report = Report::default();
    report.tables.push(t);
    let nodes: usize = w.npus.iter().map(|p| p.tasks.len()).sum();
    report.notes.push(format!(
        "run: AstraSim_Analytical_Congestion_Unaware --workload-configuration={} --system-configuration={} --remote-memory-configuration={} --network-configuration={} --comm-group-configuration={}",
        written.prefix.display(),
        out.join("system.json").display(),
        out.join("remote_memory.json").display(),
        out.join("network.yml").display(),
        out.join("comm_groups.json").display()
    ));
    if let Some(o) = generator.offload_nodes() {
        let r = &sys.remote;
        let tier = iteration::offload_tier(&sc.plan, &sc.system.tiers)?;
        report.notes.push(format!(
            "offload {}: MEM nodes per layer of {} B (parameters), {} B (activations), {}/{} B (streamed gradients), {} B (gradients at the step), {} B (updated parameters), CPU step {} µs; remote_memory.json: {} at {} GB/s, {} ns (the tier: {}, {}; ASTRA-sim reads whole GB/s and ns)",
            sc.plan.offload.name(),
            o.fetch.round(),
            o.act.round(),
            o.grad_stream.0.round(),
            o.grad_stream.1.round(),
            o.grad_step.round(),
            o.params_step.round(),
            o.cpu_step_us.unwrap_or(0),
            r.memory_type.name(),
            r.bw_gbps,
            r.latency_ns,
            tier.map_or(String::new(), |t| t.bandwidth.to_string()),
            tier.map_or(String::new(), |t| t.latency.to_string()),
        ));
    }
    let total = ours.time.total.get();
    report.notes.push(format!(
        "{nodes} nodes on {} NPUs; astrolabe astra on these files: {} ns; astrolabe estimate: {:.0} ns (ratio {:.3})",
        generator.npus(),
        est.finish_ns,
        total * 1e9,
        est.finish_ns as f64 / (total * 1e9)
    ));
    Ok(report)
}

/// Runs `astrolabe export`.
pub fn run_export(args: &ExportArgs) -> Result<Report> {
    let ExportTarget::Astra(a) = &args.target;
    if let Some(sc) = scenario(a)? {
        return export_scenario(&sc, &a.out);
    }
    let net = match (&a.topology, &a.network) {
        (Some(t), _) => export::network_from_topology(&Topology::parse(t)?),
        (None, Some(p)) => AstraNetwork::read(p)?,
        (None, None) => return Err(Error::input("export astra", "give --topology or --network")),
    };
    let sys = match &a.system {
        Some(p) => AstraSystem::read(p)?,
        None => export::default_system(net.dims.len(), model::Impl::parse(&a.algorithm)?),
    };
    let op = parse_op(&a.collective)?;
    let size = parse_size(&a.size)?;
    // Refuse inputs ASTRA-sim would crash on.
    let b = model::collective(op, size, &net, &sys, &Knobs::default(), None)?;
    let written = export::write_microbenchmark(&a.out, &net, &sys, op, size)?;
    let mut t = Table::new("files", &[("file", "file")]);
    for f in &written.files {
        t.push(vec![Cell::text(f.display().to_string())])?;
    }
    let mut report = Report::default();
    report.tables.push(t);
    report.notes.push(format!(
        "run: AstraSim_Analytical_Congestion_Unaware --workload-configuration={} --system-configuration={} --remote-memory-configuration={} --network-configuration={}",
        written.prefix.display(),
        a.out.join("system.json").display(),
        a.out.join("remote_memory.json").display(),
        a.out.join("network.yml").display()
    ));
    report
        .notes
        .push(format!("astrolabe astra predicts {} ns", b.total_ns));
    Ok(report)
}
