//! `squidbot doctor`'s checks of the Matrix channel: the homeserver answers
//! `GET /_matrix/client/versions`, and the configured login works (`whoami` with the access
//! token, or a password login as a device of doctor's own, logged out at once).

use crate::channels::plugin::{PROBE_TIMEOUT, Probe};
use crate::config::MatrixConfig;

/// The homeserver, then the login when it answered.
pub async fn checks(matrix: &MatrixConfig) -> Vec<Probe> {
    let mut checks = Vec::new();
    let url = format!(
        "{}/_matrix/client/versions",
        matrix.homeserver.trim_end_matches('/')
    );
    let what = format!("matrix homeserver {}", matrix.homeserver);
    let client = reqwest::Client::builder().timeout(PROBE_TIMEOUT).build();
    let client = match client {
        Ok(client) => client,
        Err(error) => return vec![Probe::fail(what, error.to_string())],
    };
    let result = client.get(&url).send().await.map_err(|e| e.to_string());
    let reachable = matches!(&result, Ok(response) if response.status().is_success());
    checks.push(match result {
        Ok(response) if response.status().is_success() => Probe::ok(what),
        Ok(response) => Probe::fail(
            what,
            format!(
                "GET {url} answered {} (is channels.matrix.homeserver a Matrix server?)",
                response.status()
            ),
        ),
        Err(error) => Probe::fail(
            what,
            format!("GET {url} failed: {error} (check channels.matrix.homeserver)"),
        ),
    });
    if reachable && !matrix.access_token.is_empty() {
        checks.push(matrix_whoami(&client, matrix).await);
    } else if reachable && !matrix.password.is_empty() {
        checks.push(matrix_password(&client, matrix).await);
    }
    checks
}

/// The setting the Matrix password came from, as the owner wrote it: the variable when it is
/// read from one, so a fix names what to change.
fn password_field(matrix: &MatrixConfig) -> String {
    if matrix.password_env.is_empty() {
        "channels.matrix.password".to_owned()
    } else {
        format!(
            "channels.matrix.password_env (the variable {})",
            matrix.password_env
        )
    }
}

/// The device id of doctor's own password login; logged out (so removed) at once.
const DOCTOR_DEVICE: &str = "SQUIDBOT_DOCTOR";

/// The password is accepted: a login as a device of doctor's own, logged out at once (which
/// deletes the device), so the check leaves nothing on the account and never touches the
/// gateway's device or its keys.
async fn matrix_password(client: &reqwest::Client, matrix: &MatrixConfig) -> Probe {
    let what = format!("matrix login {}", matrix.user_id);
    let base = matrix.homeserver.trim_end_matches('/');
    let body = serde_json::json!({
        "type": "m.login.password",
        "identifier": {"type": "m.id.user", "user": matrix.user_id},
        "password": matrix.password.expose(),
        "device_id": DOCTOR_DEVICE,
        "initial_device_display_name": "squidbot doctor (logged out at once)",
    });
    let url = format!("{base}/_matrix/client/v3/login");
    let response = match client.post(&url).json(&body).send().await {
        Ok(response) => response,
        Err(error) => return Probe::fail(what, format!("POST {url} failed: {error}")),
    };
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        let code = body["errcode"].as_str().unwrap_or("no errcode");
        let password = password_field(matrix);
        let fix = match code {
            "M_FORBIDDEN" => format!("fix {password} (or channels.matrix.user_id)"),
            "M_LIMIT_EXCEEDED" => "the homeserver limits logins; try again in a minute".to_owned(),
            "M_USER_DEACTIVATED" => "the account is deactivated; use another".to_owned(),
            _ => format!("check channels.matrix.user_id and {password}"),
        };
        return Probe::fail(
            what,
            format!("the password login was refused ({status}, {code}); {fix}"),
        );
    }
    let Some(token) = body["access_token"].as_str() else {
        return Probe::fail(what, format!("POST {url} gave no access_token"));
    };
    let logout = format!("{base}/_matrix/client/v3/logout");
    match client
        .post(&logout)
        .bearer_auth(token)
        .json(&serde_json::json!({}))
        .send()
        .await
    {
        Ok(response) if response.status().is_success() => Probe::ok(what),
        Ok(response) => Probe::fail(
            what,
            format!(
                "the password works, but logging doctor's device out answered {}; remove the \
                 device {DOCTOR_DEVICE} from the account in your client",
                response.status()
            ),
        ),
        Err(error) => Probe::fail(
            what,
            format!(
                "the password works, but logging doctor's device out failed: {error}; remove \
                 the device {DOCTOR_DEVICE} from the account in your client"
            ),
        ),
    }
}

/// The access token is accepted and belongs to `channels.matrix.user_id`.
async fn matrix_whoami(client: &reqwest::Client, matrix: &MatrixConfig) -> Probe {
    let what = format!("matrix login {}", matrix.user_id);
    let url = format!(
        "{}/_matrix/client/v3/account/whoami",
        matrix.homeserver.trim_end_matches('/')
    );
    let response = client
        .get(&url)
        .bearer_auth(matrix.access_token.expose())
        .send()
        .await;
    let response = match response {
        Ok(response) => response,
        Err(error) => return Probe::fail(what, format!("GET {url} failed: {error}")),
    };
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        let code = body["errcode"].as_str().unwrap_or("no errcode");
        return Probe::fail(
            what,
            format!(
                "the access token was refused ({status}, {code}); get a new one and set \
                 channels.matrix.access_token"
            ),
        );
    }
    match body["user_id"].as_str() {
        Some(user) if user == matrix.user_id => Probe::ok(what),
        Some(user) => Probe::fail(
            what,
            format!(
                "the access token belongs to {user}, not {}; fix channels.matrix.user_id or the token",
                matrix.user_id
            ),
        ),
        None => Probe::fail(what, format!("GET {url} gave no user_id")),
    }
}
