//! S5, what the client's counters (`stats()`) cost a cycle: the records one
//! uncontended acquisition and its release make, timed in blocks. Prints
//! one JSON object: the ns per cycle of each block.
//!
//! ```text
//! rlock-bench counting ROUNDS CYCLES
//! ```

use serde_json::json;

use crate::Result;

pub(crate) fn run(args: &[String]) -> Result<()> {
    let rounds: usize = args[0].parse()?;
    let cycles: u32 = args[1].parse()?;
    // The runtime's clock, as the core reads it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let _entered = runtime.enter();
    let ns: Vec<f64> = (0..rounds)
        .map(|_| rlock_core::counting_cost(cycles).as_nanos() as f64)
        .collect();
    println!("{}", json!({ "ns_per_cycle": ns }));
    Ok(())
}
