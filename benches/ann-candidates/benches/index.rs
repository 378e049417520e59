//! The memory cache store's graph (its own module, compiled here as it is in the router) against
//! an exact scan of the same unit vectors of 384 dimensions, on two data sets drawn from fixed
//! seeds, each measured and reported:
//!
//! - `uniform`: directions drawn uniformly on the sphere, HNSW's hardest case (every point's
//!   neighbours are barely nearer than any other point);
//! - `clustered`: a Gaussian mixture, 1,000 random centres with noise of norm about 0.6 around
//!   each (cosine about 0.75 between two points of one centre), nearer to what a sentence
//!   encoder makes of a service's questions;
//! - `topics` (not run unless named): the same centres with noise of norm about 1.2, the set of
//!   the first measurements in docs/benchmarks.md, between the two.
//!
//! Per data set and size: build time (inserts/s), recall@1 of the store's lookup (the graph's
//! proposals rescored on the exact vectors) against the scan for fresh queries drawn like the
//! data, the share of near-duplicate queries (a stored entry plus noise, cosine about 0.92: the
//! paraphrases a cache answers) whose entry is found, p50/p99 of single lookups, the scan's
//! p50 and their ratio, and the graph's bytes per entry. The search breadth is the store's
//! rule (`breadth`, growing with the graph) unless `ANN_EF` sweeps fixed breadths.
//!
//! Environment (all optional):
//! `ANN_SIZES=10000,100000` (sizes), `ANN_DATA=uniform,clustered`, `ANN_EF=64,128,…` (sweep
//! fixed breadths after each build), `ANN_M=16` (connectivity), `ANN_ADD=128`
//! (`ef_construction`), `ANN_PRECISION=f16|f32|i8`, `ANN_QUERIES=1000`, `ANN_PROPOSED=16` (ids
//! rescored per lookup), `ANN_THREADS=1` (threads that build the graph and the exact answers;
//! lookups are always timed on one thread), `ANN_CRITERION=1` (also time both lookups with
//! criterion), `ANN_ROUNDS=1` (times each query's lookup is timed). Timings are ratios within one run: the machine is shared.
//!
//! A graph of a million entries takes most of an hour to build on a loaded machine, and its
//! single lookups' p99 is only the index's on an idle core: `ANN_SAVE=FILE` (one set, one size)
//! writes the built graph to `FILE` and what its lookups are checked against to `FILE.meta` (the
//! set, size, shape and the exact answers of both query sets; the vectors themselves are drawn
//! again from the seeds), and `ANN_LOAD=FILE` reads them back and runs the lookup phase alone,
//! on one thread: recall@1, near-duplicates found, p50/p99 of single lookups (`ANN_ROUNDS=R`
//! times each query, for a steadier p99), the exact scan's p50. It first scans exactly for a
//! few saved answers again, so data drawn otherwise than when the graph was saved is refused.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

#[allow(dead_code, unused_imports)]
#[path = "../../../crates/runtime/src/cache/store/memory/index.rs"]
mod index;

use index::{breadth, Graph, Precision, Shape};

const DIMS: usize = 384;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f32 {
        let (a, b) = (self.unit(), self.unit());
        ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()) as f32
    }
}

fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

#[derive(Clone, Copy, Debug)]
enum Data {
    Uniform,
    Clustered,
    Topics,
}

impl Data {
    fn named(name: &str) -> Option<Data> {
        match name {
            "uniform" => Some(Data::Uniform),
            "clustered" => Some(Data::Clustered),
            "topics" => Some(Data::Topics),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Data::Uniform => "uniform",
            Data::Clustered => "clustered",
            Data::Topics => "topics",
        }
    }
}

fn precision_named(name: &str) -> Precision {
    match name {
        "f32" => Precision::F32,
        "i8" => Precision::I8,
        _ => Precision::F16,
    }
}

fn precision_name(p: Precision) -> &'static str {
    match p {
        Precision::F32 => "f32",
        Precision::F16 => "f16",
        Precision::I8 => "i8",
    }
}

/// What a saved graph's lookups are checked against, beside it in `FILE.meta`: one
/// `key value` per line, the exact answers as comma-separated ids.
struct Saved {
    data: Data,
    n: usize,
    shape: Shape,
    queries: usize,
    truth: Vec<usize>,
    copies_truth: Vec<usize>,
}

fn meta_path(graph: &Path) -> PathBuf {
    let mut name = graph.as_os_str().to_owned();
    name.push(".meta");
    PathBuf::from(name)
}

fn ids(list: &[usize]) -> String {
    list.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

impl Saved {
    fn write(&self, graph: &Path) -> std::io::Result<()> {
        let mut text = String::new();
        let _ = writeln!(text, "data {}", self.data.name());
        let _ = writeln!(text, "entries {}", self.n);
        let _ = writeln!(text, "precision {}", precision_name(self.shape.precision));
        let _ = writeln!(text, "connectivity {}", self.shape.connectivity);
        let _ = writeln!(text, "expansion_add {}", self.shape.expansion_add);
        let _ = writeln!(text, "queries {}", self.queries);
        let _ = writeln!(text, "truth {}", ids(&self.truth));
        let _ = writeln!(text, "copies_truth {}", ids(&self.copies_truth));
        std::fs::write(meta_path(graph), text)
    }

    fn read(graph: &Path) -> Result<Saved, String> {
        let path = meta_path(graph);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let field = |key: &str| -> Result<&str, String> {
            text.lines()
                .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
                .ok_or_else(|| format!("{} has no {key}", path.display()))
        };
        let number = |key: &str| -> Result<usize, String> {
            field(key)?.trim().parse().map_err(|e| format!("{key}: {e}"))
        };
        let list = |key: &str| -> Result<Vec<usize>, String> {
            field(key)?
                .split(',')
                .map(|i| i.trim().parse().map_err(|e| format!("{key}: {e}")))
                .collect()
        };
        let data = Data::named(field("data")?.trim()).ok_or("an unknown data set")?;
        let saved = Saved {
            data,
            n: number("entries")?,
            shape: Shape {
                precision: precision_named(field("precision")?.trim()),
                connectivity: number("connectivity")?,
                expansion_add: number("expansion_add")?,
            },
            queries: number("queries")?,
            truth: list("truth")?,
            copies_truth: list("copies_truth")?,
        };
        if saved.truth.len() != saved.queries || saved.copies_truth.len() != saved.queries {
            return Err(format!("{}: answers for another number of queries", path.display()));
        }
        Ok(saved)
    }
}

/// Per-dimension noise around a centre of the clustered set: norm 0.03 × √384 ≈ 0.59.
const SPREAD: f32 = 0.03;

/// And of the topics set: norm 0.06 × √384 ≈ 1.18.
const TOPICS_SPREAD: f32 = 0.06;

/// `n` unit vectors of `data`, flat; `seed` picks the sample, the centres are always the same.
fn draw(data: Data, seed: u64, n: usize) -> Vec<f32> {
    let mut rng = Rng(seed);
    let mut flat = Vec::with_capacity(n * DIMS);
    match data {
        Data::Uniform => {
            for _ in 0..n {
                flat.extend(normalise((0..DIMS).map(|_| rng.normal()).collect()));
            }
        }
        Data::Clustered | Data::Topics => {
            let spread = if matches!(data, Data::Topics) {
                TOPICS_SPREAD
            } else {
                SPREAD
            };
            let mut c = Rng(7);
            let centres: Vec<Vec<f32>> = (0..1_000)
                .map(|_| normalise((0..DIMS).map(|_| c.normal()).collect()))
                .collect();
            for _ in 0..n {
                let c = &centres[(rng.next() % centres.len() as u64) as usize];
                flat.extend(normalise(
                    c.iter().map(|x| x + spread * rng.normal()).collect(),
                ));
            }
        }
    }
    flat
}

/// Cosine between a near-duplicate query and the stored entry it was made from: a paraphrase,
/// the lookups a cache exists to answer.
const NEAR: f32 = 0.92;

/// `n` near-duplicates of entries of `points` (picked by `seed`): each entry plus noise at
/// cosine about [`NEAR`] to it.
fn near(points: &[f32], seed: u64, n: usize) -> Vec<f32> {
    let mut rng = Rng(seed);
    let count = points.len() / DIMS;
    let sigma = ((1.0 / (NEAR * NEAR) - 1.0) / DIMS as f32).sqrt();
    let mut flat = Vec::with_capacity(n * DIMS);
    for _ in 0..n {
        let i = (rng.next() % count as u64) as usize;
        flat.extend(normalise(
            points[i * DIMS..(i + 1) * DIMS]
                .iter()
                .map(|x| x + sigma * rng.normal())
                .collect(),
        ));
    }
    flat
}

/// Eight running sums, so the compiler vectorises it (a fair exact scan).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0f32; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for i in 0..8 {
            sums[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a
        .chunks_exact(8)
        .remainder()
        .iter()
        .zip(b.chunks_exact(8).remainder())
        .map(|(x, y)| x * y)
        .sum();
    sums.iter().sum::<f32>() + tail
}

fn exact(points: &[f32], q: &[f32]) -> usize {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, p) in points.chunks_exact(DIMS).enumerate() {
        let s = dot(p, q);
        if s > best.1 {
            best = (i, s);
        }
    }
    best.0
}

/// The exact answers of `queries`, on `threads` threads.
fn truth(points: &[f32], queries: &[f32], threads: usize) -> Vec<usize> {
    let rows: Vec<&[f32]> = queries.chunks_exact(DIMS).collect();
    let share = rows.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = rows
            .chunks(share)
            .map(|chunk| {
                s.spawn(move || chunk.iter().map(|q| exact(points, q)).collect::<Vec<_>>())
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().expect("a scan thread"))
            .collect()
    })
}

/// The store's lookup: the graph's proposals, scored again on the exact vectors.
fn lookup(graph: &Graph, points: &[f32], q: &[f32], proposed: usize) -> Option<usize> {
    let ids = graph.nearest(q, proposed).expect("search");
    ids.into_iter().map(|id| id as usize).max_by(|a, b| {
        let s = |i: usize| dot(&points[i * DIMS..(i + 1) * DIMS], q);
        s(*a).total_cmp(&s(*b))
    })
}

/// CPU seconds this process has spent, all threads together (Linux's `/proc/self/stat`, in
/// clock ticks of 1/100 s); `None` elsewhere. Inserts per CPU second compare builds made under
/// different loads, where inserts per second of the wall clock do not.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    // utime and stime: the 14th and 15th fields of the whole line.
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn env_list<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn env_one<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// Recall@1 and single-lookup p50/p99 (µs) at the graph's current breadth.
fn measure(
    graph: &Graph,
    points: &[f32],
    queries: &[f32],
    truth: &[usize],
    proposed: usize,
    rounds: usize,
) -> (f64, f64, f64) {
    let mut times = Vec::with_capacity(truth.len() * rounds.max(1));
    let mut hits = 0;
    for round in 0..rounds.max(1) {
        for (q, t) in queries.chunks_exact(DIMS).zip(truth) {
            let started = Instant::now();
            let found = lookup(graph, points, q, proposed);
            times.push(started.elapsed().as_secs_f64() * 1e6);
            if round == 0 {
                hits += usize::from(found == Some(*t));
            }
        }
    }
    times.sort_by(f64::total_cmp);
    (
        hits as f64 / truth.len() as f64,
        percentile(&times, 0.5),
        percentile(&times, 0.99),
    )
}

/// One built (or loaded) graph and what its lookups are checked against.
struct Run<'a> {
    set: Data,
    n: usize,
    graph: Graph,
    points: &'a [f32],
    queries: &'a [f32],
    truth: &'a [usize],
    copies: &'a [f32],
    copies_truth: &'a [usize],
}

/// The knobs of the lookup phase.
struct Lookups {
    sweep: Vec<usize>,
    proposed: usize,
    rounds: usize,
    criterion: bool,
}

/// The lookup phase, on this thread: recall@1, near-duplicates found and single-lookup
/// percentiles at the rule's breadth or each swept one, against the exact scan's p50.
fn lookups(c: &mut Criterion, run: Run<'_>, knobs: &Lookups) {
    let Run {
        set,
        n,
        mut graph,
        points,
        queries,
        truth,
        copies,
        copies_truth,
    } = run;
    let mut scan = Vec::with_capacity(50);
    for q in queries.chunks_exact(DIMS).take(50) {
        let started = Instant::now();
        black_box(exact(points, q));
        scan.push(started.elapsed().as_secs_f64() * 1e6);
    }
    scan.sort_by(f64::total_cmp);
    let scan50 = percentile(&scan, 0.5);
    let rule = graph.breadth();
    let breadths: Vec<(usize, bool)> = if knobs.sweep.is_empty() {
        vec![(rule, false)]
    } else {
        knobs.sweep.iter().map(|&ef| (ef, true)).collect()
    };
    let (proposed, rounds) = (knobs.proposed, knobs.rounds);
    for (ef, fixed) in breadths {
        if fixed {
            graph.set_breadth(ef);
        }
        let (recall, p50, p99) = measure(&graph, points, queries, truth, proposed, rounds);
        let (found, _, _) = measure(&graph, points, copies, copies_truth, proposed, 1);
        println!(
            "{set:?} n={n} ef={ef}{}: recall@1 {recall:.3}; near-duplicates found {found:.3}; lookup p50 {p50:.0} µs p99 {p99:.0} µs ({} single lookups); exact scan p50 {scan50:.0} µs; scan/lookup {:.0}×",
            if ef == breadth(n) { " (the rule's)" } else { "" },
            truth.len() * rounds.max(1),
            scan50 / p50,
        );
    }
    if knobs.criterion {
        let queries_n = truth.len();
        let mut group = c.benchmark_group(format!("cache_index_{set:?}_{n}"));
        group.sample_size(10);
        let mut i = 0;
        let mut next = || {
            i = (i + 1) % queries_n;
            &queries[i * DIMS..(i + 1) * DIMS]
        };
        group.bench_function("exact_scan", |b| b.iter(|| black_box(exact(points, next()))));
        group.bench_function("graph_and_rescore", |b| {
            b.iter(|| black_box(lookup(&graph, points, next(), proposed)))
        });
        group.finish();
    }
}

/// `ANN_LOAD`: reads a saved graph and runs the lookup phase alone.
fn load(c: &mut Criterion, path: &Path, knobs: &Lookups) {
    let saved = Saved::read(path).unwrap_or_else(|e| panic!("ANN_LOAD: {e}"));
    let started = Instant::now();
    let points = draw(saved.data, 1, saved.n);
    let queries = draw(saved.data, 2, saved.queries);
    let copies = near(&points, 3, saved.queries);
    let drawn = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let graph = Graph::load(path, DIMS, saved.shape).unwrap_or_else(|e| panic!("ANN_LOAD: {e}"));
    println!(
        "loaded {} ({:?}, {} entries, shape {:?}) in {:.1} s, data drawn again in {drawn:.1} s; graph {} bytes per entry; {} ids rescored per lookup; lookups on one thread",
        path.display(),
        saved.data,
        graph.len(),
        saved.shape,
        started.elapsed().as_secs_f64(),
        graph.memory() / saved.n.max(1),
        knobs.proposed,
    );
    assert_eq!(graph.len(), saved.n, "the saved graph holds another number of entries");
    // The vectors are drawn again rather than saved: a few exact answers scanned afresh show
    // they are the ones the graph was built from.
    for (i, q) in queries.chunks_exact(DIMS).take(5).enumerate() {
        assert_eq!(
            exact(&points, q),
            saved.truth[i],
            "query {i}: the data drawn now is not the data the graph was saved with"
        );
    }
    lookups(
        c,
        Run {
            set: saved.data,
            n: saved.n,
            graph,
            points: &points,
            queries: &queries,
            truth: &saved.truth,
            copies: &copies,
            copies_truth: &saved.copies_truth,
        },
        knobs,
    );
}

fn bench(c: &mut Criterion) {
    let knobs = Lookups {
        sweep: env_list("ANN_EF", ""),
        proposed: env_one("ANN_PROPOSED", 16),
        rounds: env_one("ANN_ROUNDS", 1),
        criterion: env_one("ANN_CRITERION", 0) == 1,
    };
    if let Ok(path) = std::env::var("ANN_LOAD") {
        return load(c, Path::new(&path), &knobs);
    }
    let save = std::env::var("ANN_SAVE").ok().map(PathBuf::from);
    let sizes: Vec<usize> = env_list("ANN_SIZES", "10000,100000");
    let data: Vec<Data> = env_list::<String>("ANN_DATA", "uniform,clustered")
        .iter()
        .filter_map(|d| Data::named(d))
        .collect();
    if save.is_some() {
        assert!(
            sizes.len() == 1 && data.len() == 1,
            "ANN_SAVE saves one graph: name one ANN_DATA and one ANN_SIZES"
        );
    }
    let queries_n: usize = env_one("ANN_QUERIES", 1_000);
    let threads: usize = env_one("ANN_THREADS", 1);
    let precision = precision_named(std::env::var("ANN_PRECISION").as_deref().unwrap_or("f16"));
    let shape = Shape {
        precision,
        connectivity: env_one("ANN_M", index::CONNECTIVITY),
        expansion_add: env_one("ANN_ADD", index::EXPANSION_ADD),
    };
    println!(
        "shape {shape:?}; {} ids rescored per lookup; {queries_n} queries; build on {threads} thread(s)",
        knobs.proposed
    );

    for &set in &data {
        for &n in &sizes {
            let points = draw(set, 1, n);
            let queries = draw(set, 2, queries_n);
            let mut graph = Graph::shaped(DIMS, shape).expect("graph");
            let (started, cpu) = (Instant::now(), cpu_seconds());
            graph.extend(0, &points, threads).expect("build");
            let build = started.elapsed().as_secs_f64();
            let cpu = cpu.zip(cpu_seconds()).map(|(a, b)| b - a);
            let started = Instant::now();
            let truth = truth(&points, &queries, threads);
            let scan_all = started.elapsed().as_secs_f64();
            let copies = near(&points, 3, queries_n);
            let copies_truth = self::truth(&points, &copies, threads);
            println!(
                "{set:?} n={n}: build {build:.1} s ({:.0} inserts/s on {threads} thread(s); {}); graph {} bytes per entry; exact answers in {scan_all:.1} s",
                n as f64 / build,
                cpu.map_or("CPU time unknown".into(), |c| format!(
                    "{c:.1} CPU s, {:.0} inserts per CPU second",
                    n as f64 / c.max(0.01)
                )),
                graph.memory() / n,
            );
            if let Some(path) = &save {
                let started = Instant::now();
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).expect("the directory of ANN_SAVE");
                }
                graph.save(path).expect("save the graph");
                Saved {
                    data: set,
                    n,
                    shape,
                    queries: queries_n,
                    truth: truth.clone(),
                    copies_truth: copies_truth.clone(),
                }
                .write(path)
                .expect("save the exact answers");
                println!(
                    "saved to {} and {} in {:.1} s",
                    path.display(),
                    meta_path(path).display(),
                    started.elapsed().as_secs_f64()
                );
            }
            lookups(
                c,
                Run {
                    set,
                    n,
                    graph,
                    points: &points,
                    queries: &queries,
                    truth: &truth,
                    copies: &copies,
                    copies_truth: &copies_truth,
                },
                &knobs,
            );
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
