//! [`ApiError`]: the OpenAI-style error body, `{"error": {"message", "type", "param", "code"}}`,
//! whose status, type and code all follow from one [`ErrorKind`], so the apps' SDKs raise the
//! exception they raise for OpenAI's own (a wrong token is an authentication error, an unknown
//! model a not-found error) and never retry what cannot succeed.

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// What went wrong, as the API's clients tell errors apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A missing or wrong bearer token.
    Unauthorized,
    /// A body that is not a request of this API.
    Invalid,
    /// A request of the API that squidbot does not serve (client-side tools, audio).
    Unsupported,
    /// A body, message or image over the limits.
    TooLarge,
    /// A model or pool that is not configured.
    UnknownModel,
    /// The gateway is shutting down.
    Unavailable,
    /// The turn failed after the message was recorded (a budget, the provider).
    TurnFailed,
}

impl ErrorKind {
    fn status(self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Invalid | Self::Unsupported => StatusCode::BAD_REQUEST,
            Self::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnknownModel => StatusCode::NOT_FOUND,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            // Not a 5xx: the SDKs retry those, and a retry would record the message again.
            Self::TurnFailed => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            Self::Unauthorized => "authentication_error",
            Self::Invalid | Self::Unsupported | Self::TooLarge | Self::UnknownModel => {
                "invalid_request_error"
            }
            Self::Unavailable => "server_error",
            Self::TurnFailed => "squidbot_error",
        }
    }

    fn code(self) -> &'static str {
        match self {
            Self::Unauthorized => "invalid_api_key",
            Self::Invalid => "invalid_request",
            Self::Unsupported => "unsupported_parameter",
            Self::TooLarge => "request_too_large",
            Self::UnknownModel => "model_not_found",
            Self::Unavailable => "shutting_down",
            Self::TurnFailed => "turn_failed",
        }
    }
}

/// An error answered to an API client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// Its kind.
    pub kind: ErrorKind,
    /// What the person is told.
    pub message: String,
    /// The request field at fault, when one is.
    pub param: Option<String>,
}

impl ApiError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            param: None,
        }
    }

    /// A malformed request, at `param` when known.
    pub fn invalid(message: impl Into<String>, param: Option<&str>) -> Self {
        Self {
            param: param.map(str::to_owned),
            ..Self::new(ErrorKind::Invalid, message)
        }
    }

    /// A request of the API squidbot does not serve, at `param`.
    pub fn unsupported(message: impl Into<String>, param: &str) -> Self {
        Self {
            param: Some(param.to_owned()),
            ..Self::new(ErrorKind::Unsupported, message)
        }
    }

    /// A request over the limits.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::TooLarge, message)
    }

    /// The error as the body of a response or of a stream's last event.
    pub fn body(&self) -> serde_json::Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind.type_name(),
                "param": self.param,
                "code": self.kind.code(),
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.kind.status(), Json(self.body())).into_response();
        let headers = response.headers_mut();
        // The OpenAI SDKs honour it: nothing here gets better by asking again.
        headers.insert("x-should-retry", header::HeaderValue::from_static("false"));
        if self.kind == ErrorKind::Unauthorized {
            headers.insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
