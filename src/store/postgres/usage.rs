//! The day's model usage replicas share (`engram_usage`, migration 4): each
//! replica adds what it spent to the day's sums, by kind, model and owner,
//! and reads the sums back to check the daily budgets against all
//! replicas' calls. An addition is an upsert that adds, so replicas adding
//! at once never lose a count.

use chrono::NaiveDate;

use super::{Database, Error};

/// One sum of the day's calls, as the table keys it: `repo` and `user` are
/// empty where the calls named none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageCount {
    pub kind: String,
    pub model: String,
    pub repo: String,
    pub user: String,
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub estimated_calls: u64,
}

impl Database {
    /// Adds these counts to `day`'s sums, in one statement. Each key appears
    /// once in `counts`.
    pub async fn add_usage(&self, day: NaiveDate, counts: &[UsageCount]) -> Result<(), Error> {
        if counts.is_empty() {
            return Ok(());
        }
        let text =
            |field: fn(&UsageCount) -> &str| -> Vec<&str> { counts.iter().map(field).collect() };
        let number = |field: fn(&UsageCount) -> u64| -> Vec<i64> {
            counts
                .iter()
                .map(|count| i64::try_from(field(count)).unwrap_or(i64::MAX))
                .collect()
        };
        let client = self.pool.get().await?;
        client
            .execute(
                "INSERT INTO engram_usage (day, kind, model, repo, user_id, calls, \
                     prompt_tokens, completion_tokens, estimated_calls) \
                 SELECT $1::date, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], \
                     $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[]) \
                 ON CONFLICT (day, kind, model, repo, user_id) DO UPDATE SET \
                     calls = engram_usage.calls + EXCLUDED.calls, \
                     prompt_tokens = engram_usage.prompt_tokens + EXCLUDED.prompt_tokens, \
                     completion_tokens = engram_usage.completion_tokens + EXCLUDED.completion_tokens, \
                     estimated_calls = engram_usage.estimated_calls + EXCLUDED.estimated_calls",
                &[
                    &day,
                    &text(|count| &count.kind),
                    &text(|count| &count.model),
                    &text(|count| &count.repo),
                    &text(|count| &count.user),
                    &number(|count| count.calls),
                    &number(|count| count.prompt_tokens),
                    &number(|count| count.completion_tokens),
                    &number(|count| count.estimated_calls),
                ],
            )
            .await?;
        Ok(())
    }

    /// `day`'s sums, as every replica added them.
    pub async fn usage_of(&self, day: NaiveDate) -> Result<Vec<UsageCount>, Error> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT kind, model, repo, user_id, calls, prompt_tokens, completion_tokens, \
                     estimated_calls FROM engram_usage WHERE day = $1",
                &[&day],
            )
            .await?;
        let number = |value: i64| u64::try_from(value).unwrap_or(0);
        rows.iter()
            .map(|row| {
                Ok(UsageCount {
                    kind: row.try_get(0)?,
                    model: row.try_get(1)?,
                    repo: row.try_get(2)?,
                    user: row.try_get(3)?,
                    calls: number(row.try_get(4)?),
                    prompt_tokens: number(row.try_get(5)?),
                    completion_tokens: number(row.try_get(6)?),
                    estimated_calls: number(row.try_get(7)?),
                })
            })
            .collect()
    }
}
