from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from .models import ApiToken
from .services import create_token, revoke_token


class ApiTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["user", "scope", "cluster", "name"]

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        if cleaned.get("cluster") is not None and cleaned.get("scope") != ApiToken.Scope.INGEST:
            self.add_error("cluster", "Only ingest tokens can be bound to a cluster.")
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ["prefix", "user", "scope", "cluster", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["scope", "revoked_at"]
    fields = ["user", "scope", "cluster", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def save_model(self, request: HttpRequest, obj: ApiToken, form, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, key = create_token(obj.user, obj.scope, obj.name, obj.cluster)
        obj.pk = token.pk
        obj.refresh_from_db()
        messages.warning(request, f"New {token.scope} token — copy it now, it is not shown again: {key}")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset) -> None:
        for token in queryset:
            revoke_token(token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).")
