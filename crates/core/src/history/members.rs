//! The members table and the per-member spend, in SQL both backends speak:
//! [`member_sql!`] is expanded in each backend's module with its database
//! type, as `sql_common!` is.

macro_rules! member_sql {
    ($db:ty) => {
        const MEMBER_COLUMNS: &str =
            "name, key_hash, created_at, expires_at, revoked_at, budget_usd, budget_period, rpm, tpm, models";

        fn member_row(r: &<$db as sqlx::Database>::Row) -> Result<crate::members::Member, StoreError> {
            use sqlx::Row as _;
            let period: Option<String> = r.try_get("budget_period")?;
            let models: String = r.try_get("models")?;
            Ok(crate::members::Member {
                name: r.try_get("name")?,
                key_hash: r.try_get("key_hash")?,
                created_at_ms: r.try_get("created_at")?,
                expires_at_ms: r.try_get("expires_at")?,
                revoked_at_ms: r.try_get("revoked_at")?,
                budget: crate::members::Budget::from_columns(r.try_get("budget_usd")?, period.as_deref()),
                rpm: r.try_get::<Option<i64>, _>("rpm")?.and_then(|n| u32::try_from(n).ok()),
                tpm: r.try_get::<Option<i64>, _>("tpm")?.and_then(|n| u64::try_from(n).ok()),
                models: crate::members::split_models(&models),
            })
        }

        pub(crate) async fn list_members(pool: &sqlx::Pool<$db>) -> Result<Vec<crate::members::Member>, StoreError> {
            let sql = format!("SELECT {MEMBER_COLUMNS} FROM members ORDER BY name");
            let rows = sqlx::QueryBuilder::<$db>::new(sql).build().fetch_all(pool).await?;
            rows.iter().map(member_row).collect()
        }

        /// Adds a member, or replaces the one of that name.
        pub(crate) async fn put_member(pool: &sqlx::Pool<$db>, m: &crate::members::Member) -> Result<(), StoreError> {
            let mut q = sqlx::QueryBuilder::<$db>::new(format!("INSERT INTO members ({MEMBER_COLUMNS}) VALUES ("));
            let mut v = q.separated(", ");
            v.push_bind(m.name.clone());
            v.push_bind(m.key_hash.clone());
            v.push_bind(m.created_at_ms);
            v.push_bind(m.expires_at_ms);
            v.push_bind(m.revoked_at_ms);
            v.push_bind(m.budget.map(|b| b.limit_usd));
            v.push_bind(m.budget.map(|b| b.period.as_str().to_string()));
            v.push_bind(m.rpm.map(i64::from));
            v.push_bind(m.tpm.and_then(|n| i64::try_from(n).ok()));
            v.push_bind(m.models.join(","));
            q.push(
                ") ON CONFLICT (name) DO UPDATE SET key_hash = excluded.key_hash, created_at = excluded.created_at,
                expires_at = excluded.expires_at, revoked_at = excluded.revoked_at, budget_usd = excluded.budget_usd,
                budget_period = excluded.budget_period, rpm = excluded.rpm, tpm = excluded.tpm, models = excluded.models",
            );
            q.build().execute(pool).await?;
            Ok(())
        }

        pub(crate) async fn remove_member(pool: &sqlx::Pool<$db>, name: &str) -> Result<bool, StoreError> {
            let mut q = sqlx::QueryBuilder::<$db>::new("DELETE FROM members WHERE name = ");
            q.push_bind(name.to_string());
            Ok(q.build().execute(pool).await?.rows_affected() > 0)
        }

        /// A row of a member's spend: `member`, `requests`, `cost_usd`,
        /// `input_tokens`, `output_tokens` (each backend sums them its own way).
        fn member_spend_row(r: &<$db as sqlx::Database>::Row) -> Result<crate::members::MemberSpend, StoreError> {
            use sqlx::Row as _;
            Ok(crate::members::MemberSpend {
                member: r.try_get("member")?,
                requests: r.try_get("requests")?,
                cost_usd: r.try_get("cost_usd")?,
                input_tokens: r.try_get("input_tokens")?,
                output_tokens: r.try_get("output_tokens")?,
            })
        }
    };
}

pub(crate) use member_sql;
