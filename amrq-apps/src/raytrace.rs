//! A ray tracer on the Split-C layer (Begel et al. §6, after pico-Ray): a generated
//! scene of spheres on a ground sphere, lit by one point light, traced with shadows and
//! up to [`BOUNCES`] mirror reflections. The ranks take blocks of [`BLOCK_ROWS`] rows
//! as they finish the last (self-scheduling: a fetch-and-add on a counter on rank 0),
//! render them, and store the pixels into the image on rank 0 with bulk stores; a final
//! `all_store_sync` says the image is whole. Run on both of Split-C's paths: `direct`
//! (the mapped segments) and `frames` (every access an Active Message).
//!
//! Every timed run's image is checked pixel by pixel against the one rank 0 renders alone
//! (the same arithmetic, so the same bits); the speed-up is against that sequential
//! render, timed in the same batch on rank 0 while the other ranks wait. The paper's
//! shape: the ray tracer scales best of its applications, near linearly: little data
//! moves (a pixel is a word after thousands of floating-point operations).

use crate::profile::{messages, waits};
use crate::AppError;
use amrq::am::HandlerTable;
use amrq::splitc::{Layout, SplitC, SpreadArray};
use amrq::Setup;
use amrq_bench::report::{Figure, Outcome};
use std::time::Instant;

/// Rows a rank takes at a time.
pub const BLOCK_ROWS: usize = 4;
/// Mirror reflections followed at most.
pub const BOUNCES: u32 = 3;

/// The size of a run.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Image width, pixels.
    pub width: usize,
    /// Image height, pixels.
    pub height: usize,
    /// Spheres per side of the grid of spheres.
    pub grid: usize,
    /// Timed batches (one more runs first, as a warm-up).
    pub batches: usize,
}

type V = [f64; 3];

fn add(a: V, b: V) -> V {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}
fn sub(a: V, b: V) -> V {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn mul(a: V, k: f64) -> V {
    [a[0] * k, a[1] * k, a[2] * k]
}
fn dot(a: V, b: V) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn unit(a: V) -> V {
    mul(a, 1.0 / dot(a, a).sqrt())
}

/// A sphere: centre, radius, colour, and the share of light it mirrors.
#[derive(Debug, Clone, Copy)]
struct Sphere {
    centre: V,
    radius: f64,
    colour: V,
    mirror: f64,
}

impl Sphere {
    /// The distance along the ray `(from, dir)` (`dir` a unit vector) to its first
    /// hit, if any beyond a small epsilon.
    fn hit(&self, from: V, dir: V) -> Option<f64> {
        let oc = sub(from, self.centre);
        let b = dot(oc, dir);
        let disc = b * b - (dot(oc, oc) - self.radius * self.radius);
        if disc < 0.0 {
            return None;
        }
        let s = disc.sqrt();
        [-b - s, -b + s].into_iter().find(|&t| t > 1e-6)
    }
}

/// The scene: a ground sphere and a `grid` × `grid` square of spheres on it, each with
/// its own colour and mirror share (the same on every rank).
struct Scene {
    spheres: Vec<Sphere>,
    light: V,
}

impl Scene {
    fn new(grid: usize) -> Self {
        let mut spheres = vec![Sphere {
            centre: [0.0, -1000.0, 0.0],
            radius: 1000.0,
            colour: [0.6, 0.6, 0.55],
            mirror: 0.1,
        }];
        let mut x = 0x7ace_u64;
        for i in 0..grid {
            for j in 0..grid {
                let mut r = || (crate::next(&mut x) % 1000) as f64 / 1000.0;
                let radius = 0.3 + 0.2 * r();
                let at = |k: usize| (k as f64 - (grid as f64 - 1.0) / 2.0) * 1.2;
                spheres.push(Sphere {
                    centre: [at(i), radius, at(j) - 2.0],
                    radius,
                    colour: [0.2 + 0.8 * r(), 0.2 + 0.8 * r(), 0.2 + 0.8 * r()],
                    mirror: 0.6 * r(),
                });
            }
        }
        Scene {
            spheres,
            light: [5.0, 8.0, 4.0],
        }
    }

    /// The nearest sphere the ray hits, and how far.
    fn nearest(&self, from: V, dir: V) -> Option<(f64, &Sphere)> {
        self.spheres
            .iter()
            .filter_map(|s| Some((s.hit(from, dir)?, s)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    }

    /// The light the ray brings back: ambient, diffuse and specular where the point
    /// sees the light, plus what its mirror share reflects.
    fn trace(&self, from: V, dir: V, bounces: u32) -> V {
        let Some((t, s)) = self.nearest(from, dir) else {
            let sky = 0.5 * (dir[1] + 1.0);
            return add(mul([1.0, 1.0, 1.0], 1.0 - sky), mul([0.5, 0.7, 1.0], sky));
        };
        let at = add(from, mul(dir, t));
        let normal = unit(sub(at, s.centre));
        let to_light = unit(sub(self.light, at));
        let lit = self.nearest(at, to_light).is_none();
        let diffuse = if lit {
            dot(normal, to_light).max(0.0)
        } else {
            0.0
        };
        let mirrored = sub(dir, mul(normal, 2.0 * dot(dir, normal)));
        let specular = if lit {
            dot(mirrored, to_light).max(0.0).powi(32)
        } else {
            0.0
        };
        let mut c = add(mul(s.colour, 0.1 + 0.9 * diffuse), [specular; 3]);
        if bounces > 0 && s.mirror > 0.0 {
            let back = self.trace(at, mirrored, bounces - 1);
            c = add(mul(c, 1.0 - s.mirror), mul(back, s.mirror));
        }
        c
    }

    /// Row `y` of a `width` × `height` image, as 0x00RRGGBB words.
    fn row(&self, (width, height): (usize, usize), y: usize, out: &mut [u32]) {
        let eye = [0.0, 1.6, 5.0];
        for (x, px) in out.iter_mut().enumerate().take(width) {
            let u = (x as f64 + 0.5) / width as f64 * 2.0 - 1.0;
            let v = 1.0 - (y as f64 + 0.5) / height as f64 * 2.0;
            let aspect = width as f64 / height as f64;
            let dir = unit([u * aspect * 0.6, v * 0.6 - 0.15, -1.0]);
            let c = self.trace(eye, dir, BOUNCES);
            let byte = |k: f64| (k.clamp(0.0, 1.0) * 255.0).round() as u32;
            *px = byte(c[0]) << 16 | byte(c[1]) << 8 | byte(c[2]);
        }
    }

    /// The whole image, rendered by one core.
    fn image(&self, (width, height): (usize, usize)) -> Vec<u32> {
        let mut img = vec![0u32; width * height];
        for (y, row) in img.chunks_mut(width).enumerate() {
            self.row((width, height), y, row);
        }
        img
    }
}

/// One parallel render into `image` (on rank 0): rows taken in blocks from the counter
/// at `next` (on rank 0, zero before the call); ns (the longest rank's, from its
/// barrier to the last store), and the rows this rank rendered.
fn render(
    sc: &SplitC<()>,
    scene: &Scene,
    (width, height): (usize, usize),
    (image, next): (&SpreadArray<u32>, usize),
) -> Result<(f64, u64), AppError> {
    let mut rows = vec![0u32; BLOCK_ROWS * width];
    let (mut mine, me) = (0, sc.my_proc());
    sc.barrier()?;
    let t = Instant::now();
    loop {
        let take = || sc.rma().fetch_add(0, next, BLOCK_ROWS as u64);
        let first = match me {
            0 => take()?, // the counter is rank 0's own
            _ => messages(8, take)?,
        } as usize;
        if first >= height {
            break;
        }
        let n = BLOCK_ROWS.min(height - first);
        for (k, row) in rows.chunks_mut(width).take(n).enumerate() {
            scene.row((width, height), first + k, row);
        }
        let (done, to) = (&rows[..n * width], image.at(first * width));
        match me {
            0 => sc.bulk_store(to, done)?, // the image is rank 0's own
            _ => messages(size_of_val(done), || sc.bulk_store(to, done))?,
        }
        mine += n as u64;
    }
    waits(|| sc.all_store_sync())?; // every pixel stored on rank 0
    let ns = crate::profile::longest(t, |mine| sc.all_reduce(mine, amrq::coll::max))?;
    Ok((ns, mine))
}

/// One rank of the ray tracer: the outcome on rank 0.
pub fn rank_main(setup: Setup, shape: Shape) -> Result<Option<Outcome>, AppError> {
    let (me, p) = (setup.rank(), setup.size());
    let (w, h) = (shape.width, shape.height);
    if w == 0 || h == 0 || shape.grid == 0 {
        return Err("--width, --height and --spheres must be at least 1".into());
    }
    let scene = Scene::new(shape.grid);
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    let (am, sc) = (job.am(), job.splitc());
    let want = if me == 0 {
        scene.image((w, h))
    } else {
        Vec::new()
    };
    // The image on rank 0 (one block as large as the image), the counter beside it.
    let image = sc.all_spread_malloc::<u32>(w * h, Layout::BlockCyclic(w * h))?;
    let next = sc.rma().alloc_symmetric(8, 8)?;
    let mut o = Outcome::new("raytrace", p, 0.0);
    for frames in [false, true] {
        sc.rma().use_frames(frames);
        let path = if frames { "frames" } else { "direct" };
        let (mut ms, mut speedup, mut balance) = (Vec::new(), Vec::new(), Vec::new());
        let mut seq = Vec::new();
        for batch in 0..=shape.batches {
            let seq_ns = crate::on_rank_0_alone(am, || crate::ns_of(|| scene.image((w, h))))?;
            if me == 0 {
                sc.rma().store(0, next, 0)?;
                // No pixel is u32::MAX (24 bits): a block not stored is seen.
                sc.bulk_write(image.at(0), &vec![u32::MAX; w * h])?;
            }
            let (ns, mine) = render(sc, &scene, (w, h), (&image, next))?;
            let most = sc.all_reduce(mine, amrq::coll::max)?;
            let wrong = if me == 0 {
                let mut got = vec![0u32; w * h];
                sc.bulk_read(image.at(0), &mut got)?;
                got.iter().zip(&want).filter(|(a, b)| a != b).count() as u64
            } else {
                0
            };
            if sc.broadcast(0, wrong)? > 0 {
                return Err(format!(
                    "ray tracer ({path}): {wrong} pixels differ from one core's image"
                )
                .into());
            }
            if batch > 0 {
                ms.push(ns / 1e6);
                speedup.push(seq_ns / ns);
                seq.push(seq_ns);
                balance.push(most as f64 / (h as f64 / p as f64));
            }
        }
        o.figures.push(Figure::of(format!("{path}_ms"), &mut ms));
        o.figures
            .push(Figure::of(format!("{path}_speedup"), &mut speedup));
        o.figures
            .push(Figure::of(format!("{path}_balance"), &mut balance));
        if !frames {
            // One more run, profiled: where the direct path's time goes.
            if me == 0 {
                sc.rma().store(0, next, 0)?;
            }
            let seq = amrq_bench::reference::median(&mut seq);
            let run = || Ok(render(sc, &scene, (w, h), (&image, next))?.0);
            crate::profile::measure(am, seq, run)?.push(&mut o);
        }
    }
    o.figures.push(Figure::single("size", (w * h) as f64));
    am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    o.notes.push(format!(
        "{w}×{h} pixels, {} spheres, shadows and up to {BOUNCES} reflections; blocks of {BLOCK_ROWS} rows taken from a counter on rank 0, pixels stored into rank 0's image; ms per image (the longest rank's); speed-up over one core's render timed in the same batch; balance: the most rows a rank rendered over the mean",
        shape.grid * shape.grid + 1
    ));
    Ok(Some(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ray_hits_the_nearest_sphere_and_the_sky_is_blue_above() {
        let s = Sphere {
            centre: [0.0, 0.0, -5.0],
            radius: 1.0,
            colour: [1.0, 0.0, 0.0],
            mirror: 0.0,
        };
        assert_eq!(s.hit([0.0; 3], [0.0, 0.0, -1.0]), Some(4.0));
        assert_eq!(s.hit([0.0; 3], [0.0, 1.0, 0.0]), None);
        let scene = Scene::new(2);
        let up = scene.trace([0.0, 50.0, 0.0], [0.0, 1.0, 0.0], BOUNCES);
        assert!(up[2] > up[0], "{up:?}");
        let img = scene.image((16, 12));
        assert!(
            img.iter().any(|&p| p != img[0]),
            "an image, not a flat colour"
        );
    }
}
