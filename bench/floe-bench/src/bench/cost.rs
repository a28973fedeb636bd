//! Dollars per million operations on AWS, from what one operation uses (counted through the
//! instrumented store and object ports, CPU time measured) and AWS list prices.
//!
//! Lambda bills wall time at the configured memory, and a function gets one full vCPU at
//! 1,769 MB: at 256 MB, CPU-bound work takes 1769/256 times as long as on a full core, so the
//! model bills measured CPU time at that share, plus an assumed network wait per store and
//! object round trip. Both are stated in the output; change them here.

use floe::objects::observed::ObjectCounts;
use floe::store::observed::StoreCounts;

/// When the prices below were read from the AWS pricing pages (us-east-1).
pub const PRICES_AS_OF: &str = "2026-11-30";

/// us-east-1 list prices, in dollars.
struct Prices {
    /// Lambda, per request.
    lambda_request: f64,
    /// Lambda on arm64 (what template.yaml builds), per GB-second.
    lambda_gb_second: f64,
    /// API Gateway HTTP API, per request of up to 512 KB (first 300 million a month).
    http_api_request: f64,
    /// DynamoDB on-demand, per read request unit (one strongly consistent read of up to 4 KB).
    read_unit: f64,
    /// DynamoDB on-demand, per write request unit (1 KB; a transactional write costs two).
    write_unit: f64,
    /// S3 Standard GET, per request.
    s3_get: f64,
    /// S3 Standard PUT and LIST, per request.
    s3_put_list: f64,
}

const PRICES: Prices = Prices {
    lambda_request: 0.20 / 1e6,
    lambda_gb_second: 0.000_013_333_4,
    http_api_request: 1.00 / 1e6,
    read_unit: 0.125 / 1e6,
    write_unit: 0.625 / 1e6,
    s3_get: 0.0004 / 1e3,
    s3_put_list: 0.005 / 1e3,
};

/// The functions' memory (template.yaml), and the memory that buys one full vCPU.
const MEMORY_GB: f64 = 0.25;
const FULL_VCPU_GB: f64 = 1.769;
/// Assumed waits per round trip inside a region, in milliseconds.
const DYNAMODB_MS: f64 = 5.0;
const S3_GET_MS: f64 = 20.0;
const S3_PUT_MS: f64 = 40.0;
const S3_LIST_MS: f64 = 30.0;
/// HTTP API meters requests in increments of this many bytes.
const HTTP_API_UNIT: f64 = 512.0 * 1024.0;

/// What one operation uses, on average.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerOperation {
    pub gets: f64,
    pub queries: f64,
    pub items_written: f64,
    pub object_gets: f64,
    pub object_puts: f64,
    pub object_lists: f64,
    pub cpu_ms: f64,
    pub response_bytes: f64,
}

impl PerOperation {
    pub fn new(
        store: &StoreCounts,
        objects: &ObjectCounts,
        cpu_ms: f64,
        requests: f64,
        response_bytes: usize,
    ) -> Self {
        Self {
            gets: store.gets as f64 / requests,
            queries: (store.queries + store.index_queries) as f64 / requests,
            items_written: store.items_written as f64 / requests,
            object_gets: objects.gets as f64 / requests,
            object_puts: objects.puts as f64 / requests,
            object_lists: (objects.lists + objects.deletes) as f64 / requests,
            cpu_ms: cpu_ms / requests,
            response_bytes: response_bytes as f64,
        }
    }
}

/// Dollars per million operations, by service.
#[derive(Debug, Clone, Copy)]
pub struct PerMillion {
    pub lambda: f64,
    pub http_api: f64,
    pub dynamodb: f64,
    pub s3: f64,
}

impl PerMillion {
    pub fn total(&self) -> f64 {
        self.lambda + self.http_api + self.dynamodb + self.s3
    }
}

/// The billed Lambda duration of one operation, in milliseconds (billed per millisecond).
pub fn billed_ms(op: &PerOperation) -> f64 {
    let cpu = op.cpu_ms * FULL_VCPU_GB / MEMORY_GB;
    let waits = (op.gets + op.queries + if op.items_written > 0.0 { 1.0 } else { 0.0 })
        * DYNAMODB_MS
        + op.object_gets * S3_GET_MS
        + op.object_puts * S3_PUT_MS
        + op.object_lists * S3_LIST_MS;
    (cpu + waits).ceil().max(1.0)
}

pub fn per_million(op: &PerOperation) -> PerMillion {
    let million = 1e6;
    let gb_seconds = billed_ms(op) / 1000.0 * MEMORY_GB;
    let units = (op.response_bytes / HTTP_API_UNIT).ceil().max(1.0);
    PerMillion {
        lambda: million * (PRICES.lambda_request + gb_seconds * PRICES.lambda_gb_second),
        http_api: million * units * PRICES.http_api_request,
        // Every Floe write is a transaction: two units per item of up to 1 KB.
        dynamodb: million
            * ((op.gets + op.queries) * PRICES.read_unit
                + op.items_written * 2.0 * PRICES.write_unit),
        s3: million
            * (op.object_gets * PRICES.s3_get
                + (op.object_puts + op.object_lists) * PRICES.s3_put_list),
    }
}

/// The model's assumptions, printed with its figures.
pub fn assumptions() -> String {
    format!(
        "AWS list prices, us-east-1, as of {PRICES_AS_OF}: Lambda arm64 $0.20 per million requests and \
         $0.0000133334 per GB-s at {:.0} MB (measured CPU time x {:.1}: one vCPU at 1,769 MB; the bench's \
         CPU time includes its own HTTP client, an upper bound), plus waits of {DYNAMODB_MS} ms per \
         DynamoDB request, {S3_GET_MS} ms per S3 GET, {S3_PUT_MS} ms per PUT, {S3_LIST_MS} ms per LIST; \
         API Gateway HTTP API $1.00 per million per 512 KB of answer; DynamoDB on-demand $0.125 per \
         million read units (strongly consistent, rows under 4 KB) and $0.625 per million write units \
         (transactions: 2 per row under 1 KB); S3 $0.40 per million GETs, $5 per million PUTs and \
         LISTs; STS AssumeRole is free.",
        MEMORY_GB * 1024.0,
        FULL_VCPU_GB / MEMORY_GB
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_load_costs_a_request_a_read_and_its_time() {
        let load = PerOperation {
            gets: 1.0,
            cpu_ms: 0.1,
            response_bytes: 2_000.0,
            ..PerOperation::default()
        };
        // 0.1 ms of CPU is 0.69 ms at 256 MB, plus one DynamoDB wait: 6 ms billed.
        assert_eq!(billed_ms(&load), 6.0);
        let cost = per_million(&load);
        assert!((cost.http_api - 1.0).abs() < 1e-9);
        assert!((cost.dynamodb - 0.125).abs() < 1e-9);
        let lambda = 0.20 + 1e6 * 0.006 * 0.25 * 0.000_013_333_4;
        assert!((cost.lambda - lambda).abs() < 1e-6, "{}", cost.lambda);
        assert_eq!(cost.s3, 0.0);
    }

    #[test]
    fn big_answers_count_as_several_gateway_requests() {
        let load = PerOperation {
            response_bytes: 4.5e6,
            ..PerOperation::default()
        };
        assert!((per_million(&load).http_api - 9.0).abs() < 1e-9);
    }
}
