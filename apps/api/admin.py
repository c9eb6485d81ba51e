from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from .models import ApiToken
from .services import create_token, revoke_token, token_binding_problem


class ApiTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["user", "scope", "cluster", "node_name", "namespaces", "name"]

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        cleaned["namespaces"] = ",".join(n.strip() for n in cleaned.get("namespaces", "").split(",") if n.strip())
        problem = token_binding_problem(
            cleaned.get("scope", ""),
            cleaned.get("cluster"),
            cleaned.get("node_name", ""),
            [n for n in cleaned["namespaces"].split(",") if n],
        )
        if problem:
            field, why = problem
            self.add_error(field, why[0].upper() + why[1:] + ".")
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    list_display = ["prefix", *ApiTokenForm.Meta.fields, "created_at", "last_used_at", "revoked_at"]
    list_filter = ["scope", "revoked_at"]
    fields = [*ApiTokenForm.Meta.fields, *readonly_fields]
    actions = ["revoke"]

    def save_model(self, request: HttpRequest, obj: ApiToken, form, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, key = create_token(obj.user, obj.scope, obj.name, obj.cluster, obj.node_name, obj.namespace_list)
        obj.pk = token.pk
        obj.refresh_from_db()
        messages.warning(request, f"New {token.scope} token — copy it now, it is not shown again: {key}")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset) -> None:
        for token in queryset:
            revoke_token(token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).")
