"""Authentication data: users (`auth/user/…`) and hashed bearer and join tokens (`auth/token/…`)."""

from ccattler.engine.auth.tokens import (
    DEFAULT_JOIN_TTL,
    DEFAULT_USER_TTL,
    MAX_TTL,
    TokenError,
    TokenRecord,
    check_token,
    create_token,
    list_tokens,
    redeem_join_token,
    revoke_token,
)
from ccattler.engine.auth.users import User, UserError, create_user, delete_user, get_user, list_users

__all__ = [
    "DEFAULT_JOIN_TTL",
    "DEFAULT_USER_TTL",
    "MAX_TTL",
    "TokenError",
    "TokenRecord",
    "User",
    "UserError",
    "check_token",
    "create_token",
    "create_user",
    "delete_user",
    "get_user",
    "list_tokens",
    "list_users",
    "redeem_join_token",
    "revoke_token",
]
