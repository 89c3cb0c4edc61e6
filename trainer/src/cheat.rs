//! Dishonest workers, for tests only (cargo feature `testing`): rounds that claim work they
//! did not do, with self-consistent hashes, so that only re-execution can catch them.

use crate::diloco::{evaluate_loss, inner_round, RoundOutput, RoundTask};
use crate::params::ParamSet;
use crate::TrainerError;

/// How a cheating worker fakes a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cheat {
    /// Runs only the first `performed` inner steps but claims all of the round's data indices.
    SkipInnerSteps {
        /// Inner steps actually taken.
        performed: u32,
    },
    /// Does no training: hands back the start weights and optimizer state (a zero
    /// pseudo-gradient) with the start weights' loss on the first batch.
    StaleWeights,
}

/// A round faked as `cheat` says, with hashes consistent with what it hands over.
pub fn cheating_round(task: &RoundTask<'_>, cheat: Cheat) -> Result<RoundOutput, TrainerError> {
    match cheat {
        Cheat::SkipInnerSteps { performed } => {
            let partial = task.indices.truncated(performed.max(1) as usize);
            let mut output = inner_round(&RoundTask {
                indices: &partial,
                ..*task
            })?;
            output.data_indices = task.indices.clone();
            Ok(output)
        }
        Cheat::StaleWeights => {
            let loss = evaluate_loss(task.weights, task.corpus, task.indices.step(0))?;
            Ok(RoundOutput {
                end_weights: task.weights.clone(),
                end_optimizer: task.optimizer.clone(),
                data_indices: task.indices.clone(),
                pseudo_gradient: ParamSet::zeros(),
                loss_micro_nats: (loss * 1e6).round() as u64,
            })
        }
    }
}
