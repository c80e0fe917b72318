//! Progress lines on stderr for long runs: what is running, how far, and the time left
//! (estimated from each step's planned length, corrected by how long the finished steps took).

use std::time::{Duration, Instant};

use crate::clock::human;

/// Tracks planned work (in seconds) for one experiment.
#[derive(Debug)]
pub struct Progress {
    experiment: String,
    started: Instant,
    planned_total: f64,
    planned_done: f64,
    steps_total: usize,
    steps_done: usize,
}

impl Progress {
    /// `steps` pieces of work planned to take `planned_secs` in total.
    pub fn new(experiment: &str, steps: usize, planned_secs: f64) -> Progress {
        eprintln!(
            "[amplab {experiment}] {steps} steps, about {} planned",
            human(Duration::from_secs_f64(planned_secs.max(0.0)))
        );
        Progress {
            experiment: experiment.to_string(),
            started: Instant::now(),
            planned_total: planned_secs.max(1e-3),
            planned_done: 0.0,
            steps_total: steps,
            steps_done: 0,
        }
    }

    /// Announces the next step (planned to take `planned_secs`) and counts it as started.
    pub fn step(&mut self, what: &str, planned_secs: f64) {
        let elapsed = self.started.elapsed().as_secs_f64();
        let pace =
            if self.planned_done > 0.0 { (elapsed / self.planned_done).max(0.5) } else { 1.0 };
        let left = (self.planned_total - self.planned_done).max(0.0) * pace;
        self.steps_done += 1;
        eprintln!(
            "[amplab {} {}/{} · {} elapsed · ~{} left] {what}",
            self.experiment,
            self.steps_done,
            self.steps_total,
            human(Duration::from_secs_f64(elapsed)),
            human(Duration::from_secs_f64(left)),
        );
        self.planned_done += planned_secs;
    }

    /// A note that belongs to the current step.
    pub fn note(&self, text: &str) {
        eprintln!("[amplab {}]   {text}", self.experiment);
    }
}
