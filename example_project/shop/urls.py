from django.urls import path

from . import views

app_name = "shop"
urlpatterns = [
    path("", views.index, name="index"),
    path("sale/<int:sale_id>/", views.sale_page, name="sale"),
    path("sale/<int:sale_id>/stock.json", views.stock_json, name="stock"),
    path("sale/<int:sale_id>/buy", views.buy, name="buy"),
    path("order/<str:number>.json", views.order_json, name="order"),
    path("order/<str:number>/pay", views.pay, name="pay"),
]
