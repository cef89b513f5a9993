"""Staff admin for accounts, memberships and API keys. No secret is shown after creation."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from accounts import services
from accounts.models import Account, AccountEvent, ApiKey, Membership


class AccountForm(forms.ModelForm):
    top_up_microcredits = forms.IntegerField(
        required=False, min_value=1, help_text="Adds microcredits to the balance; recorded as an account event."
    )

    class Meta:
        model = Account
        fields = ["name", "is_active", "record_person_control"]
        help_texts = {
            "record_person_control": "Record a person's control of the account's computers in run recordings "
            "(otherwise those periods are on the timeline only); /view then shows a recording notice."
        }


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class AccountEventInline(admin.TabularInline):
    model = AccountEvent
    extra = 0
    can_delete = False
    readonly_fields = ["created_at", "kind", "data", "actor"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    form = AccountForm
    list_display = ["name", "is_active", "microcredit_balance", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["name"]
    readonly_fields = ["microcredit_balance", "created_at"]
    inlines = [MembershipInline, AccountEventInline]

    def save_model(self, request: HttpRequest, obj: Account, form: Any, change: bool) -> None:
        if change:
            # Never write back a balance read earlier: debits and top-ups go through F() updates.
            obj.save(update_fields=["name", "record_person_control"])
            services.account_activity_set(
                account=obj, is_active=form.cleaned_data["is_active"], actor=f"staff:{request.user.get_username()}"
            )
        else:
            obj.save()
        amount = form.cleaned_data.get("top_up_microcredits")
        if amount:
            services.account_top_up(account=obj, microcredits=amount, actor=f"staff:{request.user.get_username()}")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "kind", "account", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["kind", "revoked_at"]
    search_fields = ["prefix", "name", "account__name"]
    fields = ["account", "kind", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return ["prefix", "created_at", "last_used_at", "revoked_at"]
        return ["account", "kind", "prefix", "created_at", "last_used_at", "revoked_at"]

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        key, raw = services.api_key_create(account=obj.account, kind=obj.kind, name=obj.name)
        obj.pk, obj.prefix = key.pk, key.prefix
        obj._state.adding = False
        request._ram_new_key = raw  # type: ignore[attr-defined]  # shown once, in this response only

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None) -> HttpResponse:
        raw = getattr(request, "_ram_new_key", None)
        if raw is None:
            return super().response_add(request, obj, post_url_continue)
        return TemplateResponse(
            request,
            "admin/accounts/apikey_created.html",
            {**self.admin_site.each_context(request), "key": obj, "raw_key": raw, "title": "API key created"},
        )

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            services.api_key_revoke(key=key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).", messages.SUCCESS)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "account"]
    search_fields = ["user__username", "account__name"]


class UserMembershipInline(admin.StackedInline):
    """The account a user belongs to (exactly one), set on the user's own page."""

    model = Membership
    extra = 1
    max_num = 1
    can_delete = False
    verbose_name = "account"
    verbose_name_plural = "account"


admin.site.unregister(User)


@admin.register(User)
class RamUserAdmin(UserAdmin):
    inlines = [UserMembershipInline]
    list_display = ["username", "is_staff", "is_active", "account_name", "last_login"]

    @admin.display(description="account")
    def account_name(self, obj: User) -> str:
        membership = getattr(obj, "membership", None)
        return membership.account.name if membership else ""
